"""Node failures in the simulator (issue "Reliability", item 6): what Ray Tune does with
FailureConfig(max_failures) when a node is lost, replayed by the engine."""

from __future__ import annotations

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.errors import ConfigError
from hetune.sim.faults import node_outages
from hetune.sim.loader import load_inputs
from hetune.sim.results import run_summary
from hetune.sim.state import SimulationError

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"  # gavel-12: nodes k80, p100, v100


def _run(overrides, strategy="tune-default", seed=0):
    inputs = load_inputs(EXP, overrides)
    res = simulate(inputs, inputs.make_strategy(strategy), seed)
    return res, run_summary(inputs, res.events, strategy, seed)


def _trace(t_s, node, down_s=None):
    down = "" if down_s is None else f", down_s = {down_s}"
    return [f'faults.trace=[{{t_s = {t_s}, node = "{node}"{down}}}]']


def test_a_failure_after_the_run_changes_nothing():
    plain, _ = _run([])
    late, summary = _run(_trace(1e9, "v100", 10))
    assert late.events == plain.events
    assert summary["failures"] == 0 and summary["lost_iterations"] == 0


def test_a_lost_node_costs_its_trials_the_work_since_their_checkpoint():
    plain, base = _run([])
    # at 120 s trials train on the v100 node (Ray restages paused trials one at a time, so some of
    # its GPUs may be idle at a given moment)
    res, summary = _run(_trace(120.0, "v100", 60.0))
    ev = res.events
    lost_at = [e for e in ev if e["kind"] == "worker_removed" and e["t"] == pytest.approx(120.0)]
    assert {e["node"] for e in lost_at} == {"v100"} and len(lost_at) == 4  # one worker per GPU
    back = [e for e in ev if e["kind"] == "worker_added" and e["t"] == pytest.approx(180.0)]
    assert len(back) == 4
    failures = [e for e in ev if e["kind"] == "failure"]
    assert failures and all(e["node"] == "v100" and e["t"] == pytest.approx(120.0) for e in failures)
    assert summary["failures"] == len(failures) and summary["trials_failed"] == 0
    for f in failures:
        # the trial starts again where its last checkpoint left it, on some other worker or later
        before = [e for e in ev if e["trial"] == f["trial"] and e["kind"] == "checkpoint" and e["t"] <= f["t"]]
        restart_at = before[-1]["iteration"] if before else 0
        nxt = next(e for e in ev if e["trial"] == f["trial"] and e["kind"] == "chunk" and e["t"] > f["t"])
        assert nxt["iteration"] - nxt["iterations"] == restart_at
        assert not any(e["kind"] == "chunk" and e["worker"] == f["worker"] and 120.0 < e["t"] < 180.0 for e in ev)
    assert {e["trial"] for e in ev if e["kind"] == "stop"} == set(range(20))  # the run still completes
    assert summary["lost_iterations"] > 0
    # four GPUs down for 60 s are not paid for
    assert summary["device_hours_v100"] < base["device_hours_v100"] or summary["makespan_s"] != base["makespan_s"]


def test_a_node_lost_for_good_leaves_the_run_to_the_others():
    res, summary = _run(_trace(50.0, "k80"))
    ev = res.events
    assert not any(e["kind"] == "chunk" and e["node"] == "k80" and e["t"] > 50.0 for e in ev)
    assert summary["device_hours_k80"] == pytest.approx(4 * 50.0 / 3600.0, abs=1e-6)  # rounded to 6 places
    assert {e["trial"] for e in ev if e["kind"] == "stop"} == set(range(20))


def test_a_trial_failing_more_than_max_failures_stops_for_good():
    sets = ["faults.devices.k80.mtbf_s=20", "faults.devices.k80.replace_s=5",
            "faults.devices.p100.mtbf_s=20", "faults.devices.p100.replace_s=5",
            "faults.devices.v100.mtbf_s=20", "faults.devices.v100.replace_s=5", "experiment.max_failures=1"]
    res, summary = _run(sets)
    stops = [e for e in res.events if e["kind"] == "stop"]
    assert len(stops) == 20 and summary["trials_failed"] > 0
    for s in stops:
        if s["reason"] == "failed":
            n = sum(1 for e in res.events if e["kind"] == "failure" and e["trial"] == s["trial"])
            assert n == 2  # max_failures = 1: the second failure is the last


def test_every_strategy_meets_the_same_failures():
    inputs = load_inputs(EXP, ["faults.devices.v100.mtbf_s=300", "faults.devices.v100.replace_s=30"])
    a = node_outages(inputs.experiment.faults, inputs.cluster, 3)
    b = node_outages(inputs.experiment.faults, inputs.cluster, 3)
    c = node_outages(inputs.experiment.faults, inputs.cluster, 4)
    first = [next(a["v100"]) for _ in range(5)]
    assert first == [next(b["v100"]) for _ in range(5)] and first != [next(c["v100"]) for _ in range(5)]
    assert set(a) == {"v100"}
    for strategy in ("tune-default", "hrfs", "leader-fusion", "rank-aware", "throughput-proportional",
                     "random-search"):
        res, summary = _run(["faults.devices.v100.mtbf_s=300", "faults.devices.v100.replace_s=30"], strategy, 3)
        removed = sorted({round(e["t"], 6) for e in res.events if e["kind"] == "worker_removed" and e["node"] == "v100"
                          and e["t"] < summary["makespan_s"]})
        t = 0.0
        expect = []
        for up_s, down_s in node_outages(inputs.experiment.faults, inputs.cluster, 3)["v100"]:
            t += up_s
            if t >= summary["makespan_s"]:
                break
            expect.append(round(t, 6))
            t += down_s
        assert removed == expect, strategy


def test_a_run_that_cannot_go_on_stops_with_an_error_not_a_hang(tmp_path, capsys):
    lose_all = ("faults.trace=[{t_s = 10.0, node = \"k80\"}, {t_s = 10.0, node = \"p100\"}, "
                "{t_s = 10.0, node = \"v100\"}]")
    inputs = load_inputs(EXP, [lose_all])
    with pytest.raises(SimulationError, match="stalled at t=10.0s"):
        simulate(inputs, inputs.make_strategy("tune-default"), 0)
    assert main(["simulate", str(EXP), "--out", str(tmp_path / "x"), "--set", lose_all]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hetune: failed: ") and "stalled" in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("setting, key", [
    ("faults.devices.a100.mtbf_s=10", "faults.devices.a100"),
    ("faults.devices.v100.mtbf_s=0", "faults.devices.v100.mtbf_s"),
    ("faults.trace=[{t_s = 5.0, node = \"nowhere\"}]", "faults.trace[0].node"),
    ("faults.trace=[{t_s = -5.0, node = \"v100\"}]", "faults.trace[0].t_s"),
])
def test_bad_faults_are_refused_naming_the_key(setting, key, capsys, tmp_path):
    extra = ["faults.devices.v100.replace_s=5"] if "v100.mtbf" in setting else []
    with pytest.raises(ConfigError) as exc:
        load_inputs(EXP, [setting, *extra])
    assert key in str(exc.value)
    code = main(["simulate", str(EXP), "--out", str(tmp_path / "x"), "--set", setting,
                 *[a for s in extra for a in ("--set", s)]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and key in err[0]
    assert not (tmp_path / "x").exists()


def test_a_sweep_reports_failures_per_strategy(tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", str(EXP), "--seeds", "2", "--out", str(out), "--set", "faults.devices.v100.mtbf_s=200",
                 "--set", "faults.devices.v100.replace_s=30"]) == 0
    text = capsys.readouterr().out
    assert "failures/lost trials" in text
    header = (out / "sweep.csv").read_text().splitlines()[0].split(",")
    assert {"failures", "trials_failed", "lost_iterations"} <= set(header)


def test_failures_too_frequent_to_simulate_are_refused_with_the_estimate(tmp_path, capsys):
    code = main(["simulate", str(EXP), "--out", str(tmp_path / "x"), "--set", "faults.devices.k80.mtbf_s=0.001",
                 "--set", "faults.devices.k80.replace_s=0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "node failures of [faults]" in err[0] and "--max-events" in err[0]
    assert not (tmp_path / "x").exists()
