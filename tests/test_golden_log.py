"""The exact event log of a tiny run: two trials sharing one worker (tune-default)."""

from __future__ import annotations

from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

# One GPU of type "fast" (conftest.FAST): 0.5 s per iteration, 2 s per evaluation, 1 s to save a
# checkpoint, 4 s to restore one, 8 s to start or restart a trial. 2 trials x 100 iterations,
# perturbation and checkpoint every 50 iterations, no evaluation noise.
GOLDEN = [
    (0.0, "worker_added", None, 0),
    (8.0, "trial_start", 0, 0),      # start overhead 8
    (35.0, "chunk", 0, 0),           # 50 x 0.5 + evaluation 2
    (36.0, "checkpoint", 0, 0),      # save 1
    (36.0, "pause", 0, 0),           # trial 1 waits, so trial 0 yields at its perturbation point
    (44.0, "trial_start", 1, 0),
    (71.0, "chunk", 1, 0),
    (72.0, "checkpoint", 1, 0),
    (76.0, "exploit", 1, 0),         # bottom of 2 clones the top: restore 4
    (76.0, "explore", 1, 0),
    (76.0, "pause", 1, 0),
    (88.0, "resume", 0, 0),          # restart 8 + restore 4
    (115.0, "chunk", 0, 0),
    (115.0, "stop", 0, 0),           # iteration 100: done, no checkpoint
    (127.0, "resume", 1, 0),
    (154.0, "chunk", 1, 0),
    (154.0, "stop", 1, 0),
    (154.0, "worker_removed", None, 0),
]


def test_two_trials_on_one_worker_give_exactly_this_log(setup):
    exp = setup(population=2, stop=100, interval=50, ckpt=50,
                nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8}])
    inputs = load_inputs(exp)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    assert [(e["t"], e["kind"], e.get("trial"), e.get("worker")) for e in events] == GOLDEN
    exploit = next(e for e in events if e["kind"] == "exploit")
    assert exploit["donor"] == 0 and exploit["donor_iteration"] == 50
