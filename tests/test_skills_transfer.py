"""A skills fit restated for another batch and iteration: the linear scaling rule, exactly; the shipped
CIFAR-10 default's learning file is what its generator writes."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

from conftest import REPO, bench_module
from hetune.calibrate.skills_transfer import restate
from hetune.sim.skills import Skills, SkillsParams

FITTED = {"start_logit": -2.0, "easy_weight": 3.0, "easy_rate": 0.4, "easy_lr_power": 0.7, "hard_weight": 2.0,
          "hard_rate": 0.05, "hard_lr_power": 0.9, "memo_weight": 0.8, "memo_rate": 0.02, "memo_temperature": 0.05,
          "floor_weight": 1.5, "hard_after_easy": True, "ar_corr_50": 0.3}
UNCERTAINTY = {"names": ["easy_rate", "hard_weight"], "transforms": ["log", "lin"],
               "mean": [math.log(0.4), 2.0], "cov": [[0.01, 0.0], [0.0, 0.01]]}


def _accuracy(model: Skills, lr: float, momentum: float, steps: int, per_step: int) -> float:
    state = model.initial_state(np.random.default_rng(0))._replace(dev=0.0)
    for _ in range(steps):
        state = model.advance(state, {"lr": lr, "momentum": momentum}, per_step)
    return model.accuracy(state)


@pytest.mark.parametrize("lr, momentum", [(0.01, 0.0), (0.05, 0.5), (0.2, 0.1)])
def test_at_k_times_the_batch_and_lr_every_epoch_gains_what_the_fit_says(lr, momentum):
    # the fit: readings per unit of 1,000 images at batch 10; the experiment: batch 40, 25 iterations a unit
    out = restate({"kind": "skills", "params": dict(FITTED)}, images_per_unit=1000, fitted_batch=10, batch=40)
    fitted = Skills(SkillsParams(**FITTED), 10, 10_000)
    moved = Skills(SkillsParams(**out["params"]), 40, 10_000)
    for units in (1, 7, 30):
        a = _accuracy(fitted, lr, momentum, units, 1)
        b = _accuracy(moved, 4 * lr, momentum, units, 25)
        assert b == pytest.approx(a, abs=1e-6), units  # rates are written to 6 significant digits
    # at the same lr the larger batch is another temperature: not the same run
    assert _accuracy(moved, lr, momentum, 30, 25) != pytest.approx(_accuracy(fitted, lr, momentum, 30, 1), abs=1e-3)


def test_the_uncertainty_moves_with_the_rates_and_priors():
    out = restate({"kind": "skills", "params": dict(FITTED), "uncertainty": UNCERTAINTY}, images_per_unit=1000,
                  fitted_batch=10, batch=40, priors={"hard_weight": 3.5, "diverge_eta": 2.0})
    p, u = out["params"], out["uncertainty"]
    assert u["mean"][0] == pytest.approx(math.log(p["easy_rate"]), rel=1e-6)  # log-normal around the new rate
    assert u["mean"][1] == pytest.approx(3.5) and p["hard_weight"] == 3.5 and p["diverge_eta"] == 2.0
    assert u["cov"] == UNCERTAINTY["cov"] and p["batch_ref"] == 10
    assert p["ar_corr_50"] == pytest.approx(0.3 ** (1 / 25), rel=1e-5)  # 50 units' correlation over 50 iterations


@pytest.mark.parametrize("learning, kw, needle", [
    ({"kind": "nqm"}, {}, "not a skills"),
    ({"kind": "skills", "params": dict(FITTED)}, {"batch": 0}, "must be > 0"),
    ({"kind": "skills", "params": dict(FITTED, batch_ref=128)}, {}, "already stated"),
    ({"kind": "skills", "params": dict(FITTED)}, {"priors": {"level": 1.0}}, "names no skills parameter"),
])
def test_what_cannot_be_restated_is_named(learning, kw, needle):
    args = dict(images_per_unit=1000, fitted_batch=10, batch=40) | kw
    with pytest.raises(ValueError, match=needle):
        restate(learning, **args)


def test_the_shipped_cifar10_learning_file_is_what_its_generator_writes(tmp_path, monkeypatch):
    gen = bench_module("skills_cifar10_transfer")
    monkeypatch.setattr(gen, "OUT", tmp_path / "out.toml")
    gen.OUT.parent.mkdir(exist_ok=True)
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main() == 0
    shipped = (REPO / "configs/learning/cifar10-resnet18-b512.toml").read_text()
    assert (tmp_path / "out.toml").read_text() == shipped
    assert tomllib.loads(shipped)["learning"]["params"]["batch_ref"] == 128
