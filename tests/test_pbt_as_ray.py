"""The simulator's PBT follows Ray Tune's PopulationBasedTraining point by point (issue 24, item 3).

Each test reads a simulated event log the way Ray's scheduler state evolves: ``last_score`` is
set at a trial's perturbation point only, a donor hands over the checkpoint it kept at its last
perturbation point, an exploited or paused trial restarts, and evaluation happens where the real
trainable evaluates.
"""

from __future__ import annotations

import pytest

from hetune.sim.config import quantile_count
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from conftest import FAST

INTERVAL, CKPT = 30, 10
TWO_SPEEDS = [{"name": "f", "device": "fast", "gpus": 1, "cpus": 8},
              {"name": "s", "device": "slow", "gpus": 1, "cpus": 8}]


def _run(setup, strategy: str, seed: int, ckpt: int = CKPT, **kw):
    exp = setup(population=6, stop=150, interval=INTERVAL, ckpt=ckpt, noise=0.03, nodes=TWO_SPEEDS, **kw)
    inputs = load_inputs(exp)
    return simulate(inputs, inputs.make_strategy(strategy), seed).events


def _exploits_with_ray_state(events):
    """Yield (exploit event, last_score per ranked trial, donor's last perturbation iteration)."""
    last: dict[int, float] = {}
    last_point: dict[int, int] = {}
    for e in events:
        if e["kind"] == "checkpoint" and e["iteration"] % INTERVAL == 0:
            last[e["trial"]] = e["accuracy"]
            last_point[e["trial"]] = e["iteration"]
        elif e["kind"] == "stop":
            last.pop(e["trial"], None)
        elif e["kind"] == "exploit":
            yield e, dict(last), last_point.get(e["donor"])


@pytest.mark.parametrize("strategy", ["tune-default", "hrfs", "throughput-proportional", "rank-aware"])
def test_exploits_rank_by_the_score_at_the_last_perturbation_point(setup, strategy):
    """Checkpoints every 10 iterations, perturbations every 30: a ranking that also moved at the
    checkpoints in between would put other trials in the quantiles."""
    seen = 0
    for seed in range(4):
        for e, last, donor_point in _exploits_with_ray_state(_run(setup, strategy, seed)):
            ranked = sorted(last, key=lambda t: (last[t], t))
            k = quantile_count(len(ranked), 0.25)
            assert e["trial"] in ranked[:k], (strategy, seed, e)
            assert e["donor"] in ranked[-k:], (strategy, seed, e)
            # the donor's checkpoint is the one it kept at its last perturbation point, not its latest
            assert e["donor_iteration"] == donor_point, (strategy, seed, e)
            seen += 1
    assert seen >= 5, f"only {seen} exploits: the test checks too little"


def test_an_exploited_trial_restarts_from_the_donor_checkpoint_even_on_its_own_worker(setup):
    events = _run(setup, "tune-default", 0)
    exploited = [e for e in events if e["kind"] == "exploit"]
    assert exploited
    for e in exploited:
        after = [x for x in events if x["t"] >= e["t"] and x["trial"] == e["trial"]
                 and x["kind"] in ("resume", "chunk", "stop")]
        assert after[0]["kind"] == "resume", e  # never a chunk straight on, in memory
        assert after[0]["duration_s"] >= FAST["start_overhead_s"] + FAST["load_s"]


def test_a_donor_without_a_kept_checkpoint_is_skipped(setup):
    """Two trials, one worker: at trial 1's first perturbation point trial 0 is the top trial, but
    it was alone in the ranking at its own point, so it kept no checkpoint: Ray skips the exploit."""
    exp = setup(population=2, stop=150, interval=50, ckpt=50,
                nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8}])
    inputs = load_inputs(exp)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    exploits = [(e["trial"], e["iteration"]) for e in events if e["kind"] == "exploit"]
    assert (1, 50) not in exploits and exploits == [(1, 100)]


def test_tune_default_restarts_a_trial_paused_at_its_perturbation_point(setup):
    """More trials than workers: each perturbation point pauses the reporting trial (Ray: PAUSE, then
    choose_trial_to_run); the golden log (test_golden_log) has one chosen again that pays a restart."""
    exp = setup(population=3, stop=100, interval=50, ckpt=50,
                nodes=[{"name": "n0", "device": "fast", "gpus": 2, "cpus": 8}])
    inputs = load_inputs(exp)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    for e in events:
        if e["kind"] == "checkpoint" and e["iteration"] == 50:
            nxt = next(x for x in events if x["t"] >= e["t"] and x["trial"] == e["trial"]
                       and x["kind"] in ("pause", "chunk"))
            assert nxt["kind"] == "pause", e


@pytest.mark.parametrize("strategy", ["hrfs", "throughput-proportional"])
def test_evaluation_is_charged_where_the_trainable_evaluates(setup, strategy):
    """The real trainable evaluates at every checkpoint interval and at its last iteration; chunks
    that end elsewhere (HRFS's half intervals, throughput-proportional's short chunks) do not."""
    events = _run(setup, strategy, 0, ckpt=INTERVAL, extra={"experiment": {"eval_samples": 10_000}})
    chunks = [e for e in events if e["kind"] == "chunk"]
    between = [e for e in chunks if e["iteration"] % INTERVAL and e["iteration"] < 150]
    assert between, "no chunk ended between checkpoints: the test checks nothing"
    for e in chunks:
        evaluates = e["iteration"] % INTERVAL == 0 or e["iteration"] == 150
        assert e["eval_s"] == (FAST["eval_s"] if evaluates else 0.0), e
