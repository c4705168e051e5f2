"""Step-time noise: a calibration's measured spread (step_cv) varies chunk times from seed to seed."""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np

from conftest import REPO
from hetune.calibrate.build import step_cv
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.throughput import Sample

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
BUDGET = ["experiment.budget_s=100000000"]  # every trial trains to its stop iteration


def makespans(cv: float, seeds: range) -> list[float]:
    inputs = load_inputs(EXP, BUDGET)
    model = inputs.experiment.experiment.model
    rows = inputs.calibration.models[model]
    for device in list(rows):
        rows[device] = dataclasses.replace(rows[device], step_cv=cv)
    runs = [simulate(inputs, inputs.make_strategy("random-search"), s).events for s in seeds]
    return [max(e["t"] for e in events if e["kind"] == "stop") for events in runs]


def test_without_a_spread_random_search_takes_the_same_time_every_seed_and_with_one_it_varies():
    still = makespans(0.0, range(6))
    assert len(set(still)) == 1  # no noise: the budget-mode makespan is the same in every seed
    noisy = makespans(0.15, range(6))
    assert len(set(noisy)) == 6
    # mean-one factors: the median moves by far less than the spread
    assert abs(statistics.median(noisy) / still[0] - 1) < 0.1


def test_calibrate_measures_the_spread_of_repeated_cells():
    rng = np.random.default_rng(0)
    samples = [Sample("resnet18", "cpu", b, step_time_s=0.1 * b * (1 + rng.normal(0, 0.05)), repeat=r)
               for b in (32, 64, 128) for r in range(8)]
    cv = step_cv(samples, "resnet18", "cpu")
    assert cv is not None and 0.02 < cv < 0.09
    assert step_cv([s for s in samples if s.repeat == 0], "resnet18", "cpu") is None  # no repeats: not measured


def test_a_spread_outside_zero_to_one_is_refused(tmp_path, capsys):
    cal = (REPO / "configs/calibration/reference.toml").read_text()
    bad = tmp_path / "cal.toml"
    bad.write_text(cal.replace("[models.resnet18.v100]\n", "[models.resnet18.v100]\nstep_cv = 1.5\n", 1))
    assert "step_cv = 1.5" in bad.read_text()
    assert main(["simulate", str(EXP), "--set", f'calibration.path="{bad}"', "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "step_cv" in err and "[0, 1)" in err
