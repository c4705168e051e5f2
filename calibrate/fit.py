"""Least-squares fit of step_time_s(batch) = alpha + beta * batch, with fit quality."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class LinearFit:
    """A fitted step-time line.

    Args:
        alpha_s: seconds per step at batch 0 (fixed cost), >= 0.
        beta_s_per_sample: seconds per sample, >= 0.
        r2: coefficient of determination (1 = perfect; 1 also when all points coincide).
        max_rel_residual: largest |measured - fitted| / measured over the points.
    """

    alpha_s: float
    beta_s_per_sample: float
    r2: float
    max_rel_residual: float

    def predict(self, batch: float) -> float:
        """Fitted seconds per step at ``batch``."""
        return self.alpha_s + self.beta_s_per_sample * batch


def fit_step_time(batches: Sequence[float], times_s: Sequence[float]) -> LinearFit:
    """Fit alpha and beta by least squares; both are kept non-negative.

    A negative intercept (seen with noisy small-batch timings) is refitted
    through the origin; a negative slope is refitted as a constant.

    Args:
        batches: batch sizes, samples.
        times_s: seconds per step at each batch size.
    """
    x = np.asarray(batches, dtype=float)
    y = np.asarray(times_s, dtype=float)
    if len(x) != len(y) or len(x) == 0:
        raise ValueError("need the same number (>= 1) of batch sizes and times")
    if len(np.unique(x)) < 2:
        alpha, beta = 0.0, float(np.mean(y / x))
    else:
        beta, alpha = np.polyfit(x, y, 1)
        if alpha < 0:
            alpha, beta = 0.0, float(np.dot(x, y) / np.dot(x, x))
        if beta < 0:
            alpha, beta = float(np.mean(y)), 0.0
    pred = alpha + beta * x
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    rel = float(np.max(np.abs(y - pred) / y))
    return LinearFit(float(alpha), float(beta), r2, rel)


def amdahl_parallel_fraction(t_ref: float, ref_cores: int, t_other: float, other_cores: int) -> float:
    """Parallel fraction p from step times at two core counts, clipped to [0, 1].

    Solves t_other / t_ref = (1 - p) + p * ref_cores / other_cores.

    Args:
        t_ref: seconds per step with ``ref_cores`` cores.
        ref_cores: the reference core count.
        t_other: seconds per step with ``other_cores`` cores.
        other_cores: another core count.
    """
    ratio = t_other / t_ref
    denom = ref_cores / other_cores - 1.0
    if denom == 0:
        raise ValueError("the two core counts must differ")
    return float(min(1.0, max(0.0, (ratio - 1.0) / denom)))
