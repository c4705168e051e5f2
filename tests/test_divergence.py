"""Where the simulator's decisions part from a real run's, and why (real/divergence.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.real.divergence import CAUSES, first_divergence, run_divergence
from hetune.sim.errors import ConfigError


def record(worker: int, decision, **trial0) -> dict:
    trials = [{"id": 0, "iteration": 10, "accuracy": 0.5, "status": "paused", "at_point": False, **trial0},
              {"id": 1, "iteration": 10, "accuracy": 0.4, "status": "paused", "at_point": False}]
    workers = [{"id": w, "node": "n", "device": "d", "devices": 1, "kind": "cpu", "step_time_s": 1.0, "resident": None,
                "retired": False, "idle": True} for w in (0, 1)]
    return {"kind": "assign", "worker": worker, "decision": decision, "times": 1,
            "view": {"interval": 10, "target_reached": False, "remaining_iterations": 20, "fastest_step_time_s": 1.0,
                     "workers": workers, "trials": trials, "starting": []}}


RUN0 = {"run": 0, "iterations": 10, "restart": False}
RUN1 = {"run": 1, "iterations": 10, "restart": False}


def test_logs_that_agree_have_no_divergence_and_idle_polls_do_not_count():
    real = [record(0, RUN0), record(1, "idle"), record(1, "idle"), record(1, RUN1)]
    assert first_divergence(real, [record(0, RUN0), record(1, RUN1)]) is None


def test_each_difference_is_named_and_the_first_cause_wins():
    d = first_divergence([record(0, RUN0)], [record(1, RUN1)])
    assert d is not None and d.cause == "another worker asked" and d.index == 0
    d = first_divergence([record(0, RUN0)], [record(0, RUN1, status="running", iteration=12)])
    assert d.cause == "a trial still saving or running"
    assert d.differences == {"a trial still saving or running": [0], "a trial further along": [0]}
    d = first_divergence([record(0, RUN0)], [record(0, RUN1, accuracy=0.3)])
    assert d.cause == "a reading seen in one engine only"
    starting = record(0, RUN1)
    starting["view"]["starting"] = [1]
    assert first_divergence([record(0, RUN0)], [starting]).cause == "a trial still starting"


def test_the_same_view_answered_otherwise_is_unexplained():
    d = first_divergence([record(0, RUN0), record(0, RUN0)], [record(0, RUN0), record(0, RUN1)])
    assert d.index == 1 and d.cause == "unexplained" and d.differences == {} and CAUSES[-1] == "unexplained"


def test_a_recorded_real_run_parts_for_a_named_cause(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(REPO / "results/storage/runs/hrfs", run)
    got = run_divergence(run, tmp_path / "views.jsonl")
    assert got["placing"]["real"] == 25 and 0 < got["agreed"] < 25
    assert got["divergence"]["cause"] in CAUSES[:-1]
    assert main(["compare", str(run)]) == 0
    assert "placing decisions as in the run, then parted" in capsys.readouterr().out
    kept = json.loads((run / "fidelity.json").read_text())["decision_divergence"]
    assert got["seconds"] == "run" and kept.pop("calibration_seconds")["agreed"] >= 0 and kept == got
    assert not (run / "replay-views.jsonl").exists()  # compare's replay log is scratch


def test_a_run_without_a_view_log_is_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REPO / "results/fidelity/under-load/runs/hrfs-s0", run)
    with pytest.raises(ConfigError) as exc:
        run_divergence(run)
    assert "views.jsonl" in exc.value.line() and "no view log" in exc.value.line()
