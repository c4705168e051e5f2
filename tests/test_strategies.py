"""Strategy behaviour: worker carving, roles, and our strategy's claim on the shipped clusters."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def workers_of(strategy, overrides=()):
    inputs = load_inputs(EXP, list(overrides))
    res = simulate(inputs, inputs.make_strategy(strategy), 0)
    return [(w.node, w.device, w.devices) for w in res.workers], res


def test_tune_default_cannot_use_cpu_nodes_for_gpu_trials():
    ws, _ = workers_of("tune-default", ["cluster.path=configs/clusters/mixed-small.toml"])
    assert {d for _, d, _ in ws} == {"k80", "p100", "v100"} and len(ws) == 6


def test_hrfs_carves_workers_from_the_resource_allocation_table():
    ws, res = workers_of("hrfs", ["cluster.path=configs/clusters/hrfs-lab.toml",
                                  "strategies.hrfs.resource_allocation={cpu-a=8, cpu-f=40}"])
    sizes = {}
    for node, dev, n in ws:
        sizes.setdefault(node, []).append(n)
    assert sizes["cpu-a"] == [8, 8, 8, 8] and sizes["cpu-f"] == [40] and sizes["cpu-b"] == [12, 12]
    assert sizes["gpu"] == [1]
    # every worker's first chunk is a half interval
    first = {}
    for e in res.events:
        if e["kind"] == "chunk" and e["worker"] not in first:
            first[e["worker"]] = e["iterations"]
    assert set(first.values()) == {25}


def test_hrfs_retires_weak_workers():
    _, res = workers_of("hrfs")
    removed = [e for e in res.events if e["kind"] == "worker_removed"]
    end = max(e["t"] for e in res.events)
    early = {e["device"] for e in removed if e["t"] < end}
    assert early == {"k80"}  # K80s are >= 3x slower than the fastest worker on gavel-12


def test_leader_fusion_fuses_the_fastest_node():
    ws, _ = workers_of("leader-fusion", ["strategies.leader-fusion.fuse_workers=0"])  # the class default: all
    assert ws[0] == ("v100", "v100", 4)
    assert sorted(d for _, d, n in ws[1:]) == ["k80"] * 4 + ["p100"] * 4


def test_leader_fusion_can_fuse_part_of_the_node():
    ws, _ = workers_of("leader-fusion", ["strategies.leader-fusion.fuse_workers=3"])
    assert ws[0] == ("v100", "v100", 3)
    assert sorted(d for _, d, n in ws[1:] if n == 1) == ["k80"] * 4 + ["p100"] * 4 + ["v100"]


def test_leader_fusion_others_rank_aware_puts_better_trials_on_the_faster_other_workers():
    """others="rank-aware": the P100s (the faster half of the non-leader workers) take the best-ranked
    trials, so the trials they run are better than under the default least-progressed order."""
    def mean_p100_accuracy(order, seed):
        inputs = load_inputs(EXP, [f'strategies.leader-fusion.others="{order}"',
                                   "strategies.leader-fusion.fuse_workers=0"])
        res = simulate(inputs, inputs.make_strategy("leader-fusion"), seed)
        acc = [e["accuracy"] for e in res.events
               if e["kind"] == "chunk" and e["device"] == "p100" and e["accuracy"] is not None]
        return float(np.mean(acc))

    gaps = [mean_p100_accuracy("rank-aware", s) - mean_p100_accuracy("least-progressed", s) for s in range(3)]
    assert min(gaps) > 0 and np.mean(gaps) > 0.015, gaps


def test_throughput_proportional_chunks_scale_with_speed():
    _, res = workers_of("throughput-proportional")
    its = {}
    for e in res.events:
        if e["kind"] == "chunk":
            its.setdefault(e["device"], set()).add(e["iterations"])
    assert max(its["v100"]) == 50 and max(its["k80"]) < 10


@pytest.mark.parametrize("mode,best,worst", [("max", 2, 3), ("min", 1, 3)])
def test_best_ranked_follows_pbt_mode_and_unscored_trials_rank_last(mode, best, worst):
    from types import SimpleNamespace

    from hetune.sim.runnable import Ordering, RunnableIndex

    index = RunnableIndex(mode)
    for tid, acc in [(0, 0.5), (1, 0.2), (2, 0.9), (3, None)]:
        index.add(SimpleNamespace(id=tid, iteration=10 * tid, accuracy=acc, version=0))
    assert index.peek(Ordering.BEST_RANKED).id == best
    assert index.peek(Ordering.WORST_RANKED).id == worst  # no score yet: worst whatever the mode
    assert index.peek(Ordering.BEST_RANKED, skip={best}).id == ({"max": 0, "min": 0}[mode])
    assert index.peek(Ordering.MOST_PROGRESSED).id == 3 and index.peek(Ordering.LEAST_PROGRESSED).id == 0
