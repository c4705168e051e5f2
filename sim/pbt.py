"""PBT maths as pure functions: initial sampling, explore, quantiles.

Follows Ray Tune's PopulationBasedTraining (ray/tune/schedulers/pbt.py):
explore resamples with ``resample_probability``, else multiplies a continuous
value by a random perturbation factor, or shifts a list value one step left or
right (clamped at the ends); quantiles take ceil(n * fraction) trials capped at
floor(n / 2), ranked by last score among unfinished trials.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from hetune.sim.config import Mutation, PBTConfig, quantile_count


def sample_value(m: Mutation, rng: np.random.Generator) -> float:
    """Draw one value from a mutation's distribution.

    Args:
        m: the mutation spec.
        rng: the stream to draw from.
    """
    if m.kind == "choice":
        return m.values[int(rng.integers(len(m.values)))]  # an integer choice stays an integer
    if m.kind == "loguniform":
        return float(np.exp(rng.uniform(np.log(m.low), np.log(m.high))))
    return float(rng.uniform(m.low, m.high))


def sample_config(mutations: Mapping[str, Mutation], rng: np.random.Generator,
                  fixed: Mapping[str, float] | None = None) -> dict[str, float]:
    """Draw an initial configuration, keys in sorted order for determinism; ``fixed`` values (pbt.initial_config)
    replace their draws, which are still made, so the rest of the stream is as without them."""
    drawn = {k: sample_value(mutations[k], rng) for k in sorted(mutations)}
    return {**drawn, **(fixed or {})}


def explore(config: Mapping[str, float], pbt: PBTConfig,
            rng: np.random.Generator) -> tuple[dict[str, float], dict[str, str]]:
    """Perturb a configuration as Ray Tune's PBT does.

    Args:
        config: the donor's configuration.
        pbt: PBT settings (mutations, resample probability, perturbation factors).
        rng: the PBT decision stream.

    Returns:
        (new configuration, operation per key: "resample", "* 1.2", "shift left", ...).
    """
    new = dict(config)
    ops: dict[str, str] = {}
    for key in sorted(pbt.mutations):
        m = pbt.mutations[key]
        old = config[key]
        if m.kind == "choice":
            values = list(m.values)
            if rng.random() < pbt.resample_probability or old not in values:
                new[key] = values[int(rng.integers(len(values)))]
                ops[key] = "resample"
            else:
                shift = -1 if rng.random() < 0.5 else 1
                idx = values.index(old)
                new_idx = min(max(idx + shift, 0), len(values) - 1)
                new[key] = values[new_idx]
                ops[key] = f"shift {'left' if shift < 0 else 'right'}{' (noop)' if idx == new_idx else ''}"
        else:
            if rng.random() < pbt.resample_probability:
                new[key] = sample_value(m, rng)
                ops[key] = "resample"
            else:
                factor = pbt.perturbation_factors[int(rng.integers(len(pbt.perturbation_factors)))]
                value = old * factor
                if m.clip:
                    value = min(max(value, m.low), m.high)
                new[key] = float(value)
                ops[key] = f"* {factor}"
    return new, ops


def quantiles(scores: Mapping[int, float], fraction: float, mode: str = "max") -> tuple[list[int], list[int]]:
    """Bottom and top quantile trial ids by score (ties broken by trial id).

    Args:
        scores: trial id -> last score, for unfinished trials that reported.
        fraction: quantile fraction.
        mode: "max" (higher is better) or "min".
    """
    sign = 1.0 if mode == "max" else -1.0
    ranked = sorted(scores, key=lambda t: (sign * scores[t], t))
    k = quantile_count(len(ranked), fraction)
    if k == 0:
        return [], []
    return ranked[:k], ranked[-k:]


def choose_donor(top: Sequence[int], rng: np.random.Generator) -> int:
    """Pick the donor uniformly from the top quantile."""
    return int(top[int(rng.integers(len(top)))])
