"""Budget mode and the objective a sweep ranks by (issue "An honest simulator", item 4)."""

from __future__ import annotations

import json
import math

from conftest import REPO
from hetune.cli import main
from hetune.sim.anytime import anytime_curve, best_at_budget
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.results import prices, run_summary
from hetune.sim.standings import ranking

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def _run(overrides, strategy="tune-default", seed=0):
    inputs = load_inputs(EXP, overrides)
    res = simulate(inputs, inputs.make_strategy(strategy), seed)
    return res.events, run_summary(inputs, res.events, strategy, seed)


def test_in_budget_mode_trials_train_on_past_the_target():
    events, summary = _run(["experiment.target_accuracy=0.5"])
    assert summary["time_to_target_s"] is not None
    assert any(e["reason"] == "target_accuracy" for e in events if e["kind"] == "stop")  # HRFS semantics
    events, summary = _run(["experiment.target_accuracy=0.5", "experiment.budget_s=100000"])
    stops = [e for e in events if e["kind"] == "stop"]
    assert stops and all(e["reason"] == "stop_iterations" and e["iteration"] == 1000 for e in stops)
    assert summary["time_to_target_s"] is not None  # still measured
    # a budget beyond the makespan sees every evaluation
    assert summary["best_accuracy_at_budget"] == summary["best_accuracy"]


def test_best_accuracy_at_budget_grows_with_the_budget():
    events, summary = _run(["experiment.budget_s=100000"], strategy="hrfs")
    curve = anytime_curve(events, prices(load_inputs(EXP)))
    ts = [t for t, _, _ in curve]
    assert ts == sorted(ts) and [a for _, a, _ in curve] == sorted(a for _, a, _ in curve)
    assert [c for _, _, c in curve] == sorted(c for _, _, c in curve)
    budgets = [curve[0][0] / 2, curve[len(curve) // 2][0], summary["makespan_s"]]
    got = [best_at_budget(curve, budget_s=b) for b in budgets]
    assert got[0] is None  # nothing evaluated yet
    assert got[1] <= got[2] == summary["best_accuracy"]
    # a cost budget: the same reading by dollars
    assert best_at_budget(curve, budget_cost=curve[-1][2]) == curve[-1][1]
    assert best_at_budget(curve, budget_cost=curve[0][2] / 2) is None


def test_cost_along_the_curve_is_device_hours_times_price():
    events = [
        {"t": 0.0, "kind": "worker_added", "worker": 0, "device": "a", "devices": 2},
        {"t": 0.0, "kind": "worker_added", "worker": 1, "device": "b", "devices": 1},
        {"t": 1800.0, "kind": "chunk", "accuracy": 0.4},
        {"t": 3600.0, "kind": "worker_removed", "worker": 1, "device": "b", "devices": 1},
        {"t": 7200.0, "kind": "chunk", "accuracy": 0.3},  # not an improvement: no point
        {"t": 7200.0, "kind": "chunk", "accuracy": 0.7},
    ]
    curve = anytime_curve(events, {"a": 1.0, "b": 4.0})
    # at 0.5 h: 2 devices x $1 x 0.5 h + 1 x $4 x 0.5 h = $3; at 2 h: 2 x 1 x 2 + 4 x 1 = $8
    assert curve == [[1800.0, 0.4, 3.0], [7200.0, 0.7, 8.0]]


def test_ranking_follows_the_named_objective():
    rows = [{"strategy": "fast", "seed": 0, "time_to_target_s": 10.0, "makespan_s": 100.0, "cost": 9.0,
             "best_accuracy_at_budget": 0.6},
            {"strategy": "good", "seed": 0, "time_to_target_s": 20.0, "makespan_s": 50.0, "cost": 1.0,
             "best_accuracy_at_budget": 0.8},
            {"strategy": "none", "seed": 0, "time_to_target_s": None, "makespan_s": 70.0, "cost": 2.0,
             "best_accuracy_at_budget": None}]
    assert [e["strategy"] for e in ranking(rows)] == ["fast", "good", "none"]
    assert [e["strategy"] for e in ranking(rows, objective="makespan")] == ["good", "none", "fast"]
    assert [e["strategy"] for e in ranking(rows, objective="cost")] == ["good", "none", "fast"]
    by_acc = ranking(rows, objective="best_accuracy_at_budget")
    assert [e["strategy"] for e in by_acc] == ["good", "fast", "none"]
    assert by_acc[-1]["best_at_budget_median"] == -math.inf  # evaluated nothing within the budget


def test_sweep_ranks_by_the_experiments_objective(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["sweep", str(EXP), "--strategies", "tune-default,random-search", "--seeds", "2", "--jobs", "1",
                 "--out", str(out), "--quiet", "--set", "experiment.budget_s=600",
                 "--set", "experiment.objective=\"best_accuracy_at_budget\""]) == 0
    printed = capsys.readouterr().out
    assert "ranked by best accuracy at budget" in printed and "best acc at budget" in printed
    rank = json.loads((out / "ranking.json").read_text())
    assert rank["objective"] == "best_accuracy_at_budget"
    accs = [e["best_at_budget_median"] for e in rank["strategies"]]
    assert accs == sorted(accs, key=lambda a: -1 if a is None else a, reverse=True)
