"""The skills fit's likelihood with the readings' own covariance (generalised least squares).

Readings of one seed are not independent: every run of a seed shares a term at each iteration (the
same data order), and a run's readings share its autocorrelated deviation (sim/skills.py). Least
squares that treats them as independent overstates what they show: on data the model generated from
the digits design, its 95% intervals held the truth in 41-96% of 80 cases, per parameter
(results/skills-digits/README.md). Here each seed's readings are whitened by the inverse Cholesky
factor of their covariance::

    Cov(y_a, y_b) = shared_std^2 [t_a = t_b] + ar_std^2 ar_corr_50^(|t_a - t_b| / 50) [same run]
                    + a (1 - a) / eval_samples [a = b]

so that the fit's sum of squares is the Gaussian likelihood with these random effects, and the
Laplace covariance ``(J' J)^-1`` of the whitened residuals carries them.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy.linalg import cho_factor, solve_triangular

from hetune.calibrate.skills_fit import Curve, expected
from hetune.sim.skills import Skills, SkillsParams


def whitener(curves: Sequence[Curve], params: SkillsParams, eval_samples: int) -> Callable[[list[np.ndarray]],
                                                                                            np.ndarray]:
    """A function from per-curve residuals (in ``curves``' order) to the whitened residual vector, built
    from the noise of ``params`` and its expected accuracies (for the binomial part)."""
    by_seed: dict[int, list[int]] = {}
    for i, c in enumerate(curves):
        by_seed.setdefault(c.seed, []).append(i)
    blocks: list[tuple[list[int], np.ndarray]] = []
    for seed, idx in sorted(by_seed.items()):
        its = np.concatenate([[t for t, _ in curves[i].readings] for i in idx]).astype(float)
        run = np.concatenate([[k] * len(curves[i].readings) for k, i in enumerate(idx)])
        acc = np.concatenate([expected(Skills(params, curves[i].batch, 0), curves[i]) for i in idx])
        same_t = its[:, None] == its[None, :]
        same_run = run[:, None] == run[None, :]
        lag = np.abs(its[:, None] - its[None, :]) / 50.0
        cov = params.shared_std ** 2 * same_t + params.ar_std ** 2 * (params.ar_corr_50 ** lag) * same_run
        binom = np.clip(acc * (1 - acc), 1e-4, None) / eval_samples if eval_samples > 0 else np.full(len(acc), 1e-4)
        cov[np.diag_indices_from(cov)] += binom + 1e-8
        factor, _ = cho_factor(cov, lower=True)
        blocks.append((idx, np.tril(factor)))

    def whiten(residuals: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([solve_triangular(low, np.concatenate([residuals[i] for i in idx]), lower=True)
                               for idx, low in blocks])

    return whiten
