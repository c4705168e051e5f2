"""Timing noise: a calibration's measured spreads vary chunk times (step_cv, per batch size), overheads
(overhead_cv) and a device type's whole-run speed (drift_cv) from seed to seed; `hetune calibrate spread`
measures them from recorded runs and repeated calibrations."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict

import numpy as np

from conftest import REPO
from hetune.calibrate.build import step_cv
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.throughput import Sample, load_calibration
from hetune.sim.tomlfile import atomic_write_toml, read_toml

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
BUDGET = ["experiment.budget_s=100000000"]  # every trial trains to its stop iteration


FIDELITY = REPO / "results/fidelity/under-load"


def noisy_runs(seeds: range, strategy: str = "random-search", **spreads) -> list[list[dict]]:
    inputs = load_inputs(EXP, BUDGET)
    model = inputs.experiment.experiment.model
    rows = inputs.calibration.models[model]
    for device in list(rows):
        rows[device] = dataclasses.replace(rows[device], **spreads)
    return [simulate(inputs, inputs.make_strategy(strategy), s).events for s in seeds]


def makespans(cv: float, seeds: range) -> list[float]:
    return [max(e["t"] for e in events if e["kind"] == "stop") for events in noisy_runs(seeds, step_cv=cv)]


def train_rates(events: list[dict]) -> dict[int, set[float]]:
    """Per worker: the set of its chunks' training seconds per iteration (evaluation left out)."""
    out: dict[int, set[float]] = defaultdict(set)
    for e in events:
        if e["kind"] == "chunk":
            out[e["worker"]].add(round((e["duration_s"] - e["eval_s"]) / e["iterations"], 9))
    return out


def test_drift_is_one_factor_per_device_type_for_the_whole_run_and_differs_between_runs():
    runs = noisy_runs(range(2), drift_cv=0.2)
    for events in runs:
        assert all(len(r) == 1 for r in train_rates(events).values())  # every chunk of a worker alike
    first, second = (train_rates(events) for events in runs)
    assert first != second  # another seed, another drift
    steady = train_rates(noisy_runs(range(1))[0])
    assert all(len(r) == 1 for r in steady.values()) and steady != first


def test_chunk_spread_at_the_experiments_batch_size_is_used_before_the_pooled_one():
    batch = str(load_inputs(EXP).experiment.experiment.batch_size)
    at_batch = noisy_runs(range(1), step_cv=0.0, step_cv_batch={batch: 0.2})[0]
    assert any(len(r) > 1 for r in train_rates(at_batch).values())
    elsewhere = noisy_runs(range(1), step_cv=0.0, step_cv_batch={"3": 0.2})[0]
    assert all(len(r) == 1 for r in train_rates(elsewhere).values())


def test_overhead_spread_varies_starts_and_saves_and_nothing_else():
    def durations(events, kind):
        return {round(e["duration_s"], 9) for e in events if e["kind"] == kind}
    steady, noisy = noisy_runs(range(1), "tune-default")[0], noisy_runs(range(1), "tune-default", overhead_cv=0.3)[0]
    for kind in ("trial_start", "checkpoint"):
        assert len(durations(steady, kind)) < len(durations(noisy, kind))
    assert train_rates(steady) == train_rates(noisy)  # compute untouched


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


def test_calibrate_keeps_the_spread_per_batch_size(tmp_path):
    from hetune.calibrate.build import step_cvs
    rng = np.random.default_rng(1)
    samples = [Sample("resnet18", "cpu", b, step_time_s=0.1 * b * (1 + rng.normal(0, sd)), repeat=r)
               for b, sd in ((32, 0.01), (128, 0.2)) for r in range(12)]
    cvs = step_cvs(samples, "resnet18", "cpu")
    assert cvs[32] < 0.03 < 0.1 < cvs[128]


def test_spread_is_measured_from_a_recorded_run_and_drift_from_two_calibrations(tmp_path, capsys):
    base = FIDELITY / "calibration.toml"
    later = read_toml(base)
    for row in later["models"]["resnet18"].values():  # the same host 10% slower
        row["alpha_s"] *= 1.1
        row["beta_s_per_sample"] *= 1.1
    atomic_write_toml(tmp_path / "later.toml", later)
    out = tmp_path / "cal.toml"
    assert main(["calibrate", "spread", str(base), "--runs", str(FIDELITY / "runs/curves-s100"),
                 "--drift", str(tmp_path / "later.toml"), "--out", str(out)]) == 0
    rows = load_calibration(out).models["resnet18"]
    sd = math.log(1.1) / math.sqrt(2)  # two calibrations: the sample sd of their logs
    for device in ("cpu-fast", "cpu-slow"):
        assert rows[device].drift_cv == round(math.sqrt(math.expm1(sd * sd)), 4)
        assert 0.05 < rows[device].step_cv_batch["8"] < 0.9 and rows[device].step_cv == rows[device].step_cv_batch["8"]
        assert 0 < rows[device].overhead_cv < 5
    # the run's own chunks, by hand: training seconds per iteration of the cpu-slow workers
    evs = [json.loads(line) for line in (FIDELITY / "runs/curves-s100/events.jsonl").read_text().splitlines()]
    rates = [(e["duration_s"] - e["eval_s"]) / e["iterations"] for e in evs
             if e["kind"] == "chunk" and e["device"] == "cpu-slow"]
    assert rows["cpu-slow"].step_cv == round(statistics.stdev(rates) / statistics.mean(rates), 4)
    assert "cpu-slow: chunk spread batch 8" in capsys.readouterr().out


def test_spread_refuses_what_it_cannot_measure_and_writes_nothing(tmp_path, capsys):
    base, out = str(FIDELITY / "calibration.toml"), tmp_path / "cal.toml"
    assert main(["calibrate", "spread", base, "--out", str(out)]) == 2
    assert "nothing to measure" in capsys.readouterr().err
    data = read_toml(base)
    data["models"]["resnet18"].pop("cpu-fast")  # a calibration of another cluster
    other = tmp_path / "other.toml"
    atomic_write_toml(other, data)
    assert main(["calibrate", "spread", str(other), "--runs", str(FIDELITY / "runs/curves-s100"),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cpu-fast" in err and "another cluster" in err and len(err.strip().splitlines()) == 1
    assert main(["calibrate", "spread", base, "--runs", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert not out.exists()


def test_spread_refuses_simulated_runs_and_calibrations_of_no_host(tmp_path, capsys):
    base, out = str(FIDELITY / "calibration.toml"), tmp_path / "cal.toml"
    sim = tmp_path / "sim"
    assert main(["simulate", "--out", str(sim)]) == 0
    capsys.readouterr()
    assert main(["calibrate", "spread", base, "--runs", str(sim), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "a simulated run" in err and len(err.strip().splitlines()) == 1
    published = REPO / "configs/calibration/reference.toml"  # rows from publications: no measuring host
    assert main(["calibrate", "spread", base, "--drift", str(published), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "provenance.host: missing" in err and str(published) in err
    assert not out.exists()


def test_compare_refuses_too_few_seeds_for_a_95_percent_range(tmp_path, capsys):
    assert main(["compare", str(FIDELITY / "runs/hrfs-s0"), "--seeds", "20"]) == 2
    assert ">= 39" in capsys.readouterr().err


def test_a_spread_outside_zero_to_one_is_refused(tmp_path, capsys):
    cal = (REPO / "configs/calibration/reference.toml").read_text()
    bad = tmp_path / "cal.toml"
    bad.write_text(cal.replace("[models.resnet18.v100]\n", "[models.resnet18.v100]\nstep_cv = 1.5\n", 1))
    assert "step_cv = 1.5" in bad.read_text()
    assert main(["simulate", str(EXP), "--set", f'calibration.path="{bad}"', "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "step_cv" in err and "[0, 1)" in err
