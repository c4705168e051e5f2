"""Replay of recorded populations, and fitting the surrogate's curves from recorded runs."""

from __future__ import annotations

import tomllib
import json

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.events import read_events
from hetune.sim.throughput import load_calibration

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec") / "run"
    assert main(["simulate", str(EXP), "--strategy", "tune-default", "--seed", "5", "--out", str(out)]) == 0
    return out


def summary(path):
    return json.loads((path / "summary.json").read_text())


def test_replay_under_the_same_strategy_reproduces_the_run(recorded, tmp_path):
    out = tmp_path / "replay"
    assert main(["simulate", str(EXP), "--strategy", "tune-default", "--replay", str(recorded / "events.jsonl"),
                 "--out", str(out)]) == 0
    a, b = summary(recorded), summary(out)
    for key in ("time_to_target_s", "makespan_s", "best_accuracy", "exploits"):
        assert a[key] == b[key], key
    assert b["replay_of"].endswith("events.jsonl")


def test_replay_under_another_strategy_keeps_the_population_and_changes_the_timing(recorded, tmp_path):
    out = tmp_path / "whatif"
    assert main(["simulate", str(EXP), "--strategy", "leader-fusion", "--replay", str(recorded / "events.jsonl"),
                 "--out", str(out)]) == 0
    a, b = summary(recorded), summary(out)
    assert b["best_accuracy"] == a["best_accuracy"] and b["exploits"] == a["exploits"]
    # leader-fusion fuses gavel-12's four V100s into one worker (12 GPU workers become 9), keeps the
    # leading trial there and retires the slow workers at the target: the same population finishes sooner
    workers = [{e["worker"] for e in read_events(p / "events.jsonl") if e["kind"] == "chunk"} for p in (recorded, out)]
    assert (len(workers[0]), len(workers[1])) == (12, 9)
    assert b["makespan_s"] < 0.9 * a["makespan_s"] and b["time_to_target_s"] < a["time_to_target_s"]


def test_replay_of_a_bad_file_is_refused(tmp_path, capsys):
    bad = tmp_path / "events.jsonl"
    bad.write_text('{"t": 0, "kind": "chunk"}\n')
    assert main(["simulate", str(EXP), "--replay", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "events.jsonl:1" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_calibrate_curves_recovers_the_surrogate(tmp_path, capsys):
    # Record a run with known curve parameters and little noise, then fit them back.
    runs = []
    for seed in (1, 2):
        out = tmp_path / f"run{seed}"
        assert main(["simulate", str(EXP), "--strategy", "tune-default", "--seed", str(seed), "--out", str(out),
                     "--set", "surrogate.noise_std=0.002", "--set", "surrogate.tau_iterations=300",
                     "--set", "surrogate.max_accuracy=0.9"]) == 0
        runs.append(str(out))
    cal = tmp_path / "curves.toml"
    assert main(["calibrate", "curves", *runs, "--out", str(cal)]) == 0
    fitted = load_calibration(cal).curves["resnet18"]
    assert fitted.max_accuracy == pytest.approx(0.9, abs=0.05)
    assert fitted.tau_iterations == pytest.approx(300, rel=0.3)
    assert fitted.noise_std < 0.03
    # the simulator reads them: --set calibration.path uses the fitted curves
    assert main(["simulate", str(EXP), "--set", f"calibration.path={cal}", "--out", str(tmp_path / "s")]) == 0
    assert "curves" in tomllib.loads(cal.read_text())
