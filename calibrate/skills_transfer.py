"""A skills fit restated for another experiment: other iterations, another batch, stated priors.

A fit's rates are per *reading unit* of the curves it saw (an epoch, for the published CIFAR-10 curves)
at their batch; an experiment's are per iteration (one mini-batch) at its own batch. ``restate``
moves a fit across under one stated assumption, the linear scaling rule (Goyal et al. 2017,
arXiv:1706.02677; Smith and Le 2018, arXiv:1710.06451): an experiment at a batch ``k`` times the fitted
one, with every learning rate ``k`` times larger, makes the same progress *per epoch* (per image seen)
as the fit says, in every skill:

- the temperature is stated at the fitted batch (``batch_ref``), so the floor, memorisation and the hard
  skill see the same temperature at ``k`` times the lr;
- every rate is divided by the experiment's iterations per reading unit (one epoch is ``images /
  batch`` iterations), so at the same temperature the hard skill and memorisation gain per epoch what
  the fit says;
- the easy skill's rate scales with the effective lr itself (not the temperature), so it is also
  divided by ``k ** easy_lr_power``: at ``k`` times the lr it gains per epoch what the fit says (with
  the fitted power; a draw's power differs by about 0.02, a factor of ``k ** 0.02`` on this rate).

The fit's uncertainty moves with it: the drawn rates are log-normal, so their means shift by the log of
the same factors, and the covariance stays. What a network other than the fitted one changes (its
level, where it diverges) is not in the data: ``priors`` sets such parameters at stated values
(shifting the uncertainty's mean by the same amount where the parameter is drawn).
"""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import fields
from typing import Any, Mapping

from hetune.sim.skills import SkillsParams

def restate(learning: Mapping[str, Any], *, images_per_unit: float, fitted_batch: int, batch: int,
            priors: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The ``[learning]`` table of a skills fit restated for an experiment (see the module docstring).

    Args:
        learning: a skills learning file's ``[learning]`` table (kind, params, uncertainty).
        images_per_unit: images one reading unit of the fitted curves stands for (50,000: an epoch of
            CIFAR-10's training set).
        fitted_batch: the batch the fitted curves were trained at, images.
        batch: the experiment's batch, images.
        priors: parameters set to stated values (e.g. a level or a divergence threshold the fitted
            network cannot tell).

    Raises:
        ValueError: not a skills fit, a non-positive size, a fit with its own ``batch_ref`` or units
            already restated, or a prior naming no parameter.
    """
    if learning.get("kind") != "skills" or not isinstance(learning.get("params"), Mapping):
        raise ValueError("not a skills learning table (kind = \"skills\" with params)")
    if min(images_per_unit, fitted_batch, batch) <= 0:
        raise ValueError("images_per_unit, fitted_batch and batch must be > 0")
    out = deepcopy(dict(learning))
    params = out["params"]
    if params.get("batch_ref", 0):
        raise ValueError(f"the fit is already stated at batch_ref {params['batch_ref']}: restate the original fit")
    k = batch / fitted_batch
    per_unit = images_per_unit / batch  # the experiment's iterations per reading unit
    factor = {"easy_rate": 1.0 / (per_unit * k ** float(params.get("easy_lr_power", 0.0))),
              "hard_rate": 1.0 / per_unit, "memo_rate": 1.0 / per_unit}
    for name, f in factor.items():
        params[name] = float(f"{params[name] * f:.6g}")
    # correlation over 50 iterations: the fitted one was over 50 reading units
    if params.get("ar_corr_50", 0.0) > 0:
        params["ar_corr_50"] = float(f"{params['ar_corr_50'] ** (1.0 / per_unit):.6g}")
    if params.get("warmup_iterations", 0):
        params["warmup_iterations"] = int(round(params["warmup_iterations"] * per_unit))
    params["batch_ref"] = int(fitted_batch)
    u = out.get("uncertainty") or {}
    names, transforms, mean = list(u.get("names", [])), list(u.get("transforms", [])), list(u.get("mean", []))
    for i, name in enumerate(names):
        if name in factor:
            mean[i] = mean[i] + math.log(factor[name]) if transforms[i] == "log" else mean[i] * factor[name]
    for name, value in (priors or {}).items():
        if name not in {f.name for f in fields(SkillsParams)}:
            raise ValueError(f"prior {name!r} names no skills parameter")
        if name in names:
            i = names.index(name)
            old = params.get(name, getattr(SkillsParams, name))
            mean[i] += math.log(value / old) if transforms[i] == "log" else value - old
        params[name] = value
    if u:
        u["mean"] = [float(f"{v:.8g}") for v in mean]
    return out
