"""Where the simulator parts from a plain Ray Tune PBT run (``validate --plain``), and why (issue
"Fidelity you can audit", item 2b).

A plain run asks no strategy, so it has no view log to compare (real/divergence.py). Its events
still say where and when every trial started: the simulator replays the run with its readings,
Ray's exploits and draws, its own seconds (sim/recorded_seconds.py) and Ray's node placement as an
input (sim/recorded_placement.py), under the strategy that models Tune's own choice of trial
(``tune-default``). The two event logs' placements (each ``trial_start`` and ``resume``: a trial
and the worker it landed on) are walked in order to the first that differs; the divergence is named
from both runs' state just before it, read from each log's events the same way (real/divergence.py's
causes): a trial still saving or running (started and not yet paused in one engine only), a trial
further along (iterations), a reading seen in one engine only (its last accuracy), another worker
(the same trial placed elsewhere), or unexplained (the same state, another trial started).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from hetune.real.divergence import cause_of, replay_run

STARTS = ("trial_start", "resume")


def placements(events: Sequence[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(index in the log, worker, trial) of every start and restart, in order."""
    return [(i, int(e["worker"]), int(e["trial"])) for i, e in enumerate(events) if e["kind"] in STARTS]


def state(events: Sequence[dict[str, Any]], until: int) -> dict[int, dict[str, Any]]:
    """Per trial, from the events before index ``until``: its iteration, its last reading, and
    whether it is running (started or restarted, and not paused, exploited or stopped since)."""
    out: dict[int, dict[str, Any]] = {}
    for e in events[:until]:
        if e.get("trial") is None:
            continue
        s = out.setdefault(int(e["trial"]), {"iteration": 0, "accuracy": None, "running": False})
        if e["kind"] == "chunk":
            s["iteration"] = int(e["iteration"])
            if e.get("accuracy") is not None:
                s["accuracy"] = e["accuracy"]
        elif e["kind"] == "exploit":  # the trial goes back to its donor's checkpoint
            s["iteration"] = int(e["donor_iteration"])
        if e["kind"] in STARTS:
            s["running"] = True
        elif e["kind"] in ("pause", "exploit", "stop", "failure"):
            s["running"] = False
    return out


def first_plain_divergence(real: Sequence[dict[str, Any]], sim: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How many placements agree before the first that differs, and that divergence (None: none)."""
    rp, sp = placements(real), placements(sim)
    for n, ((ri, rw, rt), (si, sw, st)) in enumerate(zip(rp, sp)):
        if (rw, rt) == (sw, st):
            continue
        a, b = state(real, ri), state(sim, si)
        diff: dict[str, list[int]] = {}
        for cause, key in (("a trial still saving or running", "running"), ("a trial further along", "iteration"),
                           ("a reading seen in one engine only", "accuracy")):
            ids = sorted(i for i in a.keys() | b.keys() if a.get(i, {}).get(key) != b.get(i, {}).get(key))
            if ids:
                diff[cause] = ids
        if rt == st:
            diff["another worker asked"] = sorted({rw, sw})
        return {"agreed": n, "divergence": {"real": [rw, {"run": rt}], "sim": [sw, {"run": st}],
                                            "cause": cause_of(diff), "differences": diff}}
    return {"agreed": min(len(rp), len(sp)), "divergence": None}


def run_plain_divergence(run_dir: Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Replay the plain run in ``run_dir`` (its seconds, Ray's placement) and find the first divergence.

    Returns a dict like real/divergence.py's run_divergence: strategy, seed, ``seconds`` and
    ``placement`` ("run"), placements in each engine, how many agreed, and the divergence.
    """
    from hetune.sim.events import read_events
    from hetune.sim.recorded_placement import RecordedPlacement
    from hetune.sim.snapshot import load_snapshot

    inputs, _ = load_snapshot(run_dir, overrides)
    strategy, seed = inputs.experiment.strategy.name, inputs.experiment.experiment.seed
    events = read_events(run_dir / "events.jsonl")
    sim = replay_run(run_dir, inputs, RecordedPlacement(inputs.make_strategy(strategy), events), events)
    got = first_plain_divergence(events, sim)
    return {"strategy": strategy, "seed": seed, "seconds": "run", "placement": "run",
            "placing": {"real": len(placements(events)), "sim": len(placements(sim))}, **got}
