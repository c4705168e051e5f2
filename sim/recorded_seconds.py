"""A recorded run's own seconds for a replay of it (issue "Fidelity you can audit", item 2b).

A replay (sim/replay.py) takes a real run's readings and PBT draws; with these seconds it also takes
its times, so that where the replay's decisions part from the run's, step times and overheads the
calibration got wrong cannot be the reason. What is left is what the simulator does not model:
Tune's scheduling steps, the order results arrive in, a chunk split at another iteration.

Per trial, from the iteration where the engine asks (the record of a trial's start or save at one
iteration is kept for the replay's at that iteration; an exploited trial goes back to its donor's
iteration, so one iteration may hold several, used in order):

- a start or restart: the seconds from the decision that placed the trial to its ``trial_start`` or
  ``resume`` event (Tune's actor start, the restore's download and load), split as the event says
  (its ``copy_s`` and ``load_s``, the rest the restart); a plain run (``validate --plain``) records
  no decisions, and there they count from when the worker let its last trial go (its pause, save or
  stop; the run's start for a first trial); a replay that keeps a trial in memory where
  the run restarted it pays nothing, as always;
- a chunk: each recorded chunk's training seconds per iteration (``duration_s - eval_s``) over the
  iterations the replay's chunk covers, in the order the run did them (the replay may split them into
  other chunks), and the evaluation of the recorded chunk it ends in;
- a save: the seconds from the chunk's event to its ``checkpoint`` event (the pause, the save and
  its upload).

When a trial's record runs out (the replay did more than the run, after the two parted), the
calibration's seconds with its random factors answer (sim/timing_noise.py).
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hetune.sim.state import Trial
    from hetune.sim.throughput import DeviceModel
    from hetune.sim.timing_noise import TimingNoise


class RecordedSeconds:
    """The seconds of a recorded run (events.jsonl, sim/events.py), trial by trial.

    Args:
        events: the run's event log.
    """

    def __init__(self, events: list[dict[str, Any]]) -> None:
        # (trial, iteration) -> (restart, copy, load) seconds of each start there, in order
        self.brings: dict[tuple[int, int], deque[tuple[float, float, float]]] = defaultdict(deque)
        self.chunks: dict[int, deque[list[float]]] = defaultdict(deque)  # [iterations left, train s/iter, eval s]
        self.saves: dict[tuple[int, int], deque[float]] = defaultdict(deque)  # (trial, iteration) -> seconds
        placed: dict[int, float] = {}  # trial -> time of the decision that placed it, s
        free: dict[int, float] = defaultdict(float)  # worker -> when it last let a trial go, s
        chunk_end: dict[int, float] = {}
        restores_at: dict[int, int] = {}  # trial -> what its next restart restores (older start events lag)
        for e in events:
            if e.get("trial") is None:  # a worker's event: nothing of a trial's
                continue
            t, kind = int(e["trial"]), e["kind"]
            if kind == "decision" and e.get("action") == "run":
                placed[t] = float(e["t"])
            elif kind in ("pause", "stop", "checkpoint") and e.get("worker") is not None:
                free[int(e["worker"])] = float(e["t"])
            if kind in ("trial_start", "resume") and e.get("worker") is not None:
                copy_s, load_s = float(e.get("copy_s") or 0.0), float(e.get("load_s") or 0.0)
                # a plain run records no decisions: from when its worker let the last trial go
                total = float(e["t"]) - (placed.pop(t) if t in placed else free[int(e["worker"])])
                at = 0 if kind == "trial_start" else restores_at.get(t, 0)  # where the engine asks
                self.brings[(t, at)].append((max(total - copy_s - load_s, 0.0), copy_s, load_s))
            elif kind == "chunk" and int(e.get("iterations") or 0) > 0:
                k, eval_s = int(e["iterations"]), float(e.get("eval_s") or 0.0)
                self.chunks[t].append([k, max(float(e["duration_s"]) - eval_s, 0.0) / k, eval_s])
                chunk_end[t] = float(e["t"])
            elif kind == "checkpoint" and t in chunk_end:
                self.saves[(t, int(e["iteration"]))].append(float(e["t"]) - chunk_end.pop(t))
            if kind == "checkpoint":
                restores_at[t] = int(e["iteration"])
            elif kind == "exploit":  # it restarts from its donor's checkpoint
                restores_at[t] = int(e["donor_iteration"])
        self.fallback: TimingNoise | None = None
        self.used = {"recorded": 0, "calibrated": 0}  # questions answered from the record, and not

    def over(self, fallback: TimingNoise) -> RecordedSeconds:
        """These seconds, with ``fallback`` answering where the record has none (the engine binds it)."""
        self.fallback = fallback
        return self

    def _fallback(self) -> TimingNoise:
        assert self.fallback is not None, "RecordedSeconds used before over()"
        self.used["calibrated"] += 1
        return self.fallback

    def start_s(self, trial: Trial, dm: DeviceModel) -> float:
        """Seconds from placing a trial to its first step."""
        if self.brings[(trial.id, 0)]:
            self.used["recorded"] += 1
            return sum(self.brings[(trial.id, 0)].popleft())
        return self._fallback().start_s(trial, dm)

    def restore_s(self, trial: Trial, dm: DeviceModel, copy_s: float) -> tuple[float, float, float]:
        """Seconds of a restart from the checkpoint at the trial's iteration: (restart, copy, load)."""
        if self.brings[(trial.id, trial.iteration)]:
            self.used["recorded"] += 1
            return self.brings[(trial.id, trial.iteration)].popleft()
        return self._fallback().restore_s(trial, dm, copy_s)

    def chunk_s(self, trial: Trial, device: str, dm: DeviceModel, iterations: int, train_s: float,
                eval_s: float) -> tuple[float, float]:
        """Seconds of a chunk of ``iterations``: the recorded ones, if the record still has that many."""
        q = self.chunks[trial.id]
        if sum(c[0] for c in q) < iterations:
            return self._fallback().chunk_s(trial, device, dm, iterations, train_s, eval_s)
        self.used["recorded"] += 1
        train, need, ended = 0.0, iterations, q[0]
        while need:
            ended = q[0]
            take = min(need, int(ended[0]))
            train += take * ended[1]
            ended[0] -= take
            need -= take
            if not ended[0]:
                q.popleft()
        # the evaluation of the recorded chunk this one ends in (a replay evaluates where the run did)
        return train, (ended[2] or eval_s) if eval_s else 0.0

    def save_s(self, trial: Trial, dm: DeviceModel, upload_s: float) -> float:
        """Seconds from a chunk's end at the trial's iteration to its checkpoint, the upload included."""
        if self.saves[(trial.id, trial.iteration)]:
            self.used["recorded"] += 1
            return self.saves[(trial.id, trial.iteration)].popleft()
        return self._fallback().save_s(trial, dm, upload_s)
