"""The exact event log of a tiny run: two trials sharing one worker (tune-default)."""

from __future__ import annotations

from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

# One GPU of type "fast" (conftest.FAST): 0.5 s per iteration, 2 s per evaluation, 1 s to save a
# checkpoint, 4 s to restore one, 8 s to start or restart a trial. 2 trials x 150 iterations,
# perturbation and checkpoint every 50 iterations, no evaluation noise. PBT as Ray Tune's:
# ranked by the score at each trial's last perturbation point, a donor hands over the checkpoint
# it kept there while top-quantile, and a paused or exploited trial restarts.
GOLDEN = [
    (0.0, "worker_added", None, 0),
    (0.0, "decision", 0, 0),         # the strategy: run trial 0 on worker 0 for 50 iterations
    (8.0, "trial_start", 0, 0),      # start overhead 8
    (35.0, "chunk", 0, 0),           # 50 x 0.5 + evaluation 2
    (36.0, "checkpoint", 0, 0),      # save 1; alone in the ranking, so not top: keeps no checkpoint
    (36.0, "decision", 1, 0),
    (36.0, "pause", 0, 0),           # trial 1 waits, so trial 0 yields at its perturbation point
    (44.0, "trial_start", 1, 0),
    (71.0, "chunk", 1, 0),
    (72.0, "checkpoint", 1, 0),      # bottom of 2, but the donor kept no checkpoint: no exploit
    (72.0, "decision", 0, 0),
    (72.0, "pause", 1, 0),           # trial 0 waits
    (84.0, "resume", 0, 0),          # restart 8 + restore 4 (tie at iteration 50: lower id first)
    (111.0, "chunk", 0, 0),
    (112.0, "checkpoint", 0, 0),     # top at iteration 100: keeps this checkpoint for donors
    (112.0, "decision", 1, 0),
    (112.0, "pause", 0, 0),
    (124.0, "resume", 1, 0),
    (151.0, "chunk", 1, 0),
    (152.0, "checkpoint", 1, 0),     # bottom: clones trial 0's kept checkpoint (iteration 100)
    (152.0, "exploit", 1, 0),        # no time here: the restart is charged at its next resume
    (152.0, "explore", 1, 0),
    (152.0, "pause", 1, 0),
    (152.0, "decision", 0, 0),
    (164.0, "resume", 0, 0),
    (191.0, "chunk", 0, 0),
    (191.0, "stop", 0, 0),           # iteration 150: done, no checkpoint
    (191.0, "decision", 1, 0),
    (203.0, "resume", 1, 0),         # restart 8 + restore 4 of the donor's checkpoint
    (230.0, "chunk", 1, 0),
    (230.0, "stop", 1, 0),
    (230.0, "worker_removed", None, 0),
]


def test_two_trials_on_one_worker_give_exactly_this_log(setup):
    exp = setup(population=2, stop=150, interval=50, ckpt=50,
                nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8}])
    inputs = load_inputs(exp)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    assert [(e["t"], e["kind"], e.get("trial"), e.get("worker")) for e in events] == GOLDEN
    exploit = next(e for e in events if e["kind"] == "exploit")
    assert exploit["donor"] == 0 and exploit["donor_iteration"] == 100
