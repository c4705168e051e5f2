"""Invariants of every simulated run, over strategies, seeds, populations and clusters (hypothesis)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import write_setup
from hetune.sim import strategies
from hetune.sim.engine import simulate
from hetune.sim.events import validate_event
from hetune.sim.loader import load_inputs

CLUSTERS = [
    [{"name": "a", "device": "fast", "gpus": 2, "cpus": 8}, {"name": "b", "device": "slow", "gpus": 3, "cpus": 8}],
    [{"name": "a", "device": "fast", "gpus": 4, "cpus": 8}],
    [{"name": "a", "device": "slow", "gpus": 1, "cpus": 8}, {"name": "b", "device": "fast", "gpus": 1, "cpus": 8},
     {"name": "c", "device": "slow", "gpus": 2, "cpus": 8}],
]


def check_invariants(events: list[dict], interval: int, stop: int) -> None:
    for i, e in enumerate(events):
        validate_event(e, f"event {i}")
    # A worker never runs two things at once: its busy intervals do not overlap.
    busy = defaultdict(list)
    for e in events:
        if e.get("duration_s") and e["worker"] is not None:
            busy[e["worker"]].append((e["t"] - e["duration_s"], e["t"]))
    for spans in busy.values():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert b0 >= a1 - 1e-6
    # Every iteration of a trial's lineage is simulated exactly once, in order; an exploit moves
    # the trial to its donor's checkpointed iteration (Ray Tune's semantics).
    reached = defaultdict(int)
    stopped = set()
    last_acc: dict[int, float] = {}
    at_decision: dict[int, dict[int, float]] = {}  # scores when the trial's PBT decision was taken
    for e in events:
        t = e["trial"]
        if t is None:
            continue
        assert t not in stopped, f"trial {t} ran after it stopped"
        if e["kind"] == "chunk":
            assert e["iteration"] == reached[t] + e["iterations"]
            reached[t] = e["iteration"]
            last_acc[t] = e["accuracy"]
        if e["kind"] == "checkpoint":
            # asynchronous PBT decides right after the checkpoint; the copy then takes time
            at_decision[t] = dict(last_acc)
        if e["kind"] == "exploit":
            # only at perturbation points, and only from a donor ranked above the trial when the
            # decision was taken (synchronous PBT decides at the barrier: no worker, no wait)
            assert e["iteration"] % interval == 0
            scores = last_acc if e["worker"] is None else at_decision[t]
            assert scores[e["donor"]] >= scores[t]
            reached[t] = e["donor_iteration"]
        if e["kind"] == "stop":
            stopped.add(t)
            assert e["iteration"] == stop or e["reason"] == "target_accuracy"
    assert all(v <= stop for v in reached.values())


@settings(max_examples=40, deadline=None, derandomize=True,  # deterministic, as every test here
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategy=st.sampled_from(strategies.names()), seed=st.integers(0, 10_000),
       population=st.integers(1, 9), cluster=st.sampled_from(range(len(CLUSTERS))),
       synch=st.booleans(), half=st.booleans())
def test_invariants(tmp_path_factory, strategy, seed, population, cluster, synch, half):
    tmp: Path = tmp_path_factory.mktemp("inv")
    ckpt = 10 if half else 20
    exp = write_setup(tmp, population=population, stop=60, interval=20, ckpt=ckpt, nodes=CLUSTERS[cluster],
                      noise=0.01, target=0.5, synch=synch)
    inputs = load_inputs(exp)
    res = simulate(inputs, inputs.make_strategy(strategy), seed)
    check_invariants(res.events, 20, 60)
    assert all(t.status == "stopped" for t in res.trials)


def test_synch_exploits_only_after_all_trials_reach_the_point(setup):
    exp = setup(population=6, stop=100, interval=50, noise=0.01,
                nodes=[{"name": "a", "device": "fast", "gpus": 1, "cpus": 8},
                       {"name": "b", "device": "slow", "gpus": 1, "cpus": 8}], synch=True)
    inputs = load_inputs(exp)
    res = simulate(inputs, inputs.make_strategy("tune-default"), 3)
    exploits = [e for e in res.events if e["kind"] == "exploit"]
    assert exploits
    for ex in exploits:
        # every trial had checkpointed iteration 50 before any exploit at 50
        ck = {e["trial"] for e in res.events
              if e["kind"] == "checkpoint" and e["iteration"] == 50 and e["t"] <= ex["t"]}
        assert ck == set(range(6))


def test_exploit_copies_the_donor_state(setup):
    exp = setup(population=8, stop=200, interval=50, noise=0.0)
    inputs = load_inputs(exp)
    res = simulate(inputs, inputs.make_strategy("tune-default"), 1)
    ex = [e for e in res.events if e["kind"] == "exploit"]
    assert ex
    e = ex[0]
    donor_ckpt_acc = [c["accuracy"] for c in res.events if c["kind"] == "chunk" and c["trial"] == e["donor"]
                      and c["iteration"] == e["donor_iteration"]][0]
    # after the exploit the trial's next chunk starts from the donor's state: its accuracy is
    # at least the donor's checkpointed accuracy (noise is 0, progress only grows)
    nxt = [c for c in res.events if c["kind"] == "chunk" and c["trial"] == e["trial"] and c["t"] > e["t"]][0]
    assert nxt["accuracy"] >= donor_ckpt_acc
