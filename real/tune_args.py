"""The arguments hetune gives Ray Tune's PopulationBasedTraining, from an experiment's [pbt] table.

One place, so that ``hetune validate``, the PBT parity benchmark's stand-in controller
(real/pbt_standin.py) and its input checks build Ray's scheduler the same way.
"""

from __future__ import annotations

from typing import Any


def pbt_kwargs(exp: Any) -> dict[str, Any]:
    """Keyword arguments of ``PopulationBasedTraining`` for the experiment ``exp`` (an ExperimentConfig):
    its [pbt] settings, the mutations as Tune search spaces, and a clip where a mutation asks for one."""
    from ray import tune

    pbt = exp.pbt
    mutations: dict[str, Any] = {}
    for key, m in pbt.mutations.items():
        if m.kind == "choice":
            mutations[key] = list(m.values)
        elif m.kind == "loguniform":
            mutations[key] = tune.loguniform(m.low, m.high)
        else:
            mutations[key] = tune.uniform(m.low, m.high)
    clipped = {k: (m.low, m.high) for k, m in pbt.mutations.items() if m.kind != "choice" and m.clip}

    def clip(config: dict[str, Any]) -> dict[str, Any]:  # HRFS keeps lr inside its range; Ray does not
        for k, (lo, hi) in clipped.items():
            config[k] = min(max(config[k], lo), hi)
        return config

    return {"time_attr": pbt.time_attr, "metric": pbt.metric, "mode": pbt.mode,
            "perturbation_interval": pbt.perturbation_interval, "burn_in_period": pbt.burn_in,
            "hyperparam_mutations": mutations, "quantile_fraction": pbt.quantile_fraction,
            "resample_probability": pbt.resample_probability,
            "perturbation_factors": tuple(pbt.perturbation_factors), "synch": pbt.synch,
            "custom_explore_fn": clip if clipped else None}
