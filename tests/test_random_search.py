"""random-search: the no-PBT baseline trains the initial configurations as they are, fastest devices first."""

from __future__ import annotations

from conftest import REPO
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def _events(strategy, seed=0):
    inputs = load_inputs(EXP, ["cluster.path=configs/clusters/gavel-12.toml"])
    return simulate(inputs, inputs.make_strategy(strategy), seed)


def test_no_pbt_and_no_moves():
    res = _events("random-search")
    kinds = {e["kind"] for e in res.events}
    assert "exploit" not in kinds and "explore" not in kinds
    where: dict[int, set[int]] = {}
    for e in res.events:
        if e["kind"] == "chunk":
            where.setdefault(e["trial"], set()).add(e["worker"])
    assert where and all(len(ws) == 1 for ws in where.values())  # a trial never leaves its worker
    assert all(t.status == "stopped" for t in res.trials)


def test_first_trials_go_to_the_fastest_workers():
    res = _events("random-search")
    speed = [w.step_time_s for w in res.workers]
    assert speed == sorted(speed)  # carved fastest first
    first_worker = {}
    for e in res.events:
        if e["kind"] == "chunk":
            first_worker.setdefault(e["trial"], e["worker"])
    started = sorted(first_worker, key=lambda t: min(e["t"] for e in res.events if e["kind"] == "chunk"
                                                     and e["trial"] == t))
    # trial 0 (first in FIFO order) runs on the fastest worker
    assert first_worker[0] == 0 and started[0] == 0


def test_same_initial_configs_as_a_pbt_strategy():
    def first_configs(res):
        out = {}
        for e in res.events:
            if e["kind"] == "trial_start":
                out.setdefault(e["trial"], e["config"])
        return out

    rs, td = _events("random-search", 3), _events("tune-default", 3)
    assert first_configs(rs) == first_configs(td)
    assert [t.config for t in rs.trials] == [first_configs(rs)[t.id] for t in rs.trials]  # never explored
