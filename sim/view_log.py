"""What a strategy saw and answered, written down, and asked again: the strict decision replay.

Both engines hand a strategy the same SimView (sim/strategies/base.py). With a ``ViewLog`` an engine
writes, for every question it asks the strategy (``assign``) and every chunk it reports
(``on_chunk``), the view as plain data and the answer, one JSON line each, in order. ``replay`` then
rebuilds each view (``FrozenView``) and puts the same questions to a fresh strategy object: a
strategy whose answers depend only on what it was shown answers as recorded every time. An answer
that differs names an input the view does not carry (wall-clock time, an object kept from an
earlier view and read again later, a random draw), which would make the two engines part for
reasons no event shows (issue "Fidelity you can audit", item 2a).

Repeated identical questions (the Ray side asks every idle slot at each of Tune's scheduling
steps) are one line with a count, so a log stays small.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from hetune.sim.enums import DeviceKind, Ordering, TrialStatus
from hetune.sim.runnable import ordering_keys
from hetune.sim.strategies.base import Decision, Retire, Run, SimView, Strategy, TrialView, WorkerView
from hetune.sim.tomlfile import atomic_replace

FORMAT = 1  # the log's layout; bumped when a field changes meaning
VIEWS_FILE = "views.jsonl"  # its name in a run folder


def encode_decision(decision: Decision) -> Any:
    """A decision as JSON: "idle", "retire" or {"run": trial, "iterations": n, "restart": bool}."""
    if isinstance(decision, Run):
        return {"run": decision.trial, "iterations": decision.iterations, "restart": decision.restart}
    return "retire" if isinstance(decision, Retire) else "idle"


def _trial(t: TrialView, view: SimView) -> dict[str, Any]:
    return {"id": t.id, "iteration": t.iteration, "accuracy": t.accuracy, "status": str(t.status),
            "at_point": view.at_perturbation_point(t.id)}


def freeze(view: SimView, trials: Iterable[TrialView]) -> dict[str, Any]:
    """Everything ``view`` can tell a strategy, as plain data.

    Args:
        view: the engine's view now.
        trials: every trial the engine knows (the SimView protocol reaches trials only through
            ``peek``, residents and ``starting``; the log keeps all of them so that any
            ``peek`` can be answered again).
    """
    return {
        "interval": view.interval, "target_reached": view.target_reached,
        "remaining_iterations": view.remaining_iterations, "fastest_step_time_s": view.fastest_step_time_s(),
        "workers": [{"id": w.id, "node": w.node, "device": w.device, "devices": w.devices, "kind": str(w.kind),
                     "step_time_s": w.step_time_s, "resident": None if w.resident is None else w.resident.id,
                     "retired": w.retired, "idle": w.idle} for w in view.workers],
        "trials": [_trial(t, view) for t in sorted(trials, key=lambda t: t.id)],
        "starting": [t.id for t in view.starting()],
    }


class Direct:
    """Asks the strategy and writes nothing down: what an engine does without a log."""

    def ask(self, strategy: Strategy, worker: WorkerView, view: SimView, trials: Iterable[TrialView]) -> Decision:
        """``strategy.assign(worker, view)``."""
        return strategy.assign(worker, view)

    def chunk(self, strategy: Strategy, worker: WorkerView, trial: TrialView, iterations: int, seconds: float,
              view: SimView, trials: Iterable[TrialView]) -> None:
        """``strategy.on_chunk(worker, trial, iterations, seconds, view)``."""
        strategy.on_chunk(worker, trial, iterations, seconds, view)

    def flush(self) -> int:
        return 0


DIRECT = Direct()


class ViewLog(Direct):
    """Writes a run's questions to a strategy, with the views they were asked with, to a JSONL file.

    Lines are buffered and appended at ``flush`` (the Ray side flushes whenever it saves the
    strategy's state), so the log holds no open file and pickles with the scheduler.

    Args:
        path: the log file (written anew; a resumed run's log is cut to ``keep`` lines first).
        strategy: the strategy's registered name (in the header line).
        mode: pbt.mode, which decides what best-ranked means when a view is rebuilt.
        engine: "sim" or "real".
        keep: lines to keep of an existing log (a resumed run: those its saved strategy had seen);
            None starts a new log.
    """

    def __init__(self, path: str | Path, strategy: str, mode: str, engine: str, keep: int | None = None) -> None:
        self.path = Path(path)
        lines: list[str] = []
        if keep is not None and self.path.is_file():
            lines = self.path.read_text().splitlines(keepends=True)[:keep]
        if not lines:
            lines = [json.dumps({"kind": "header", "format": FORMAT, "strategy": strategy, "mode": mode,
                                 "engine": engine}) + "\n"]
        atomic_replace(self.path, "".join(lines).encode())
        self.lines = len(lines)
        self._buffer: list[str] = []
        self._pending: dict[str, Any] | None = None

    def ask(self, strategy: Strategy, worker: WorkerView, view: SimView, trials: Iterable[TrialView]) -> Decision:
        """``strategy.assign(worker, view)``, written down with the view it saw."""
        frozen = freeze(view, trials)
        decision = strategy.assign(worker, view)
        record = {"kind": "assign", "worker": worker.id, "view": frozen, "decision": encode_decision(decision),
                  "times": 1}
        if self._pending is not None and {**self._pending, "times": 1} == record:
            self._pending["times"] += 1  # the same question with the same answer: one line, counted
        else:
            self._add(self._pending)
            self._pending = record
        return decision

    def chunk(self, strategy: Strategy, worker: WorkerView, trial: TrialView, iterations: int, seconds: float,
              view: SimView, trials: Iterable[TrialView]) -> None:
        """``strategy.on_chunk(...)``, written down with the view it saw."""
        frozen = freeze(view, trials)
        strategy.on_chunk(worker, trial, iterations, seconds, view)
        self._add(self._pending)
        self._pending = None
        self._add({"kind": "chunk", "worker": worker.id, "trial": trial.id, "iterations": iterations,
                   "seconds": seconds, "view": frozen})

    def flush(self) -> int:
        """Append what is buffered (the pending question included); return the lines the log holds."""
        self._add(self._pending)
        self._pending = None
        self._append()
        return self.lines

    def _add(self, record: dict[str, Any] | None) -> None:
        if record is not None:
            self._buffer.append(json.dumps(record) + "\n")
            self.lines += 1
            if len(self._buffer) >= 256:  # a long simulated run: bounded memory
                self._append()

    def _append(self) -> None:
        if self._buffer:
            with self.path.open("a") as fh:
                fh.write("".join(self._buffer))
            self._buffer.clear()


@dataclass(eq=False)
class FrozenTrial:
    """A trial as a recorded view showed it (TrialView)."""

    id: int
    iteration: int
    accuracy: float | None
    status: TrialStatus
    at_point: bool


@dataclass(eq=False)
class FrozenWorker:
    """A worker as a recorded view showed it (WorkerView)."""

    id: int
    node: str
    device: str
    devices: int
    kind: DeviceKind
    step_time_s: float
    resident: FrozenTrial | None
    retired: bool
    idle: bool


@dataclass(eq=False)
class FrozenView:
    """A recorded view, answering as the engine's view did (SimView).

    Args:
        data: a view as ``freeze`` wrote it.
        mode: pbt.mode of the run.
    """

    data: dict[str, Any]
    mode: str
    trials: dict[int, FrozenTrial] = field(init=False)
    _workers: list[FrozenWorker] = field(init=False)

    def __post_init__(self) -> None:
        d = self.data
        self.trials = {t["id"]: FrozenTrial(t["id"], t["iteration"], t["accuracy"], TrialStatus(t["status"]),
                                            t["at_point"]) for t in d["trials"]}
        self._workers = [FrozenWorker(w["id"], w["node"], w["device"], w["devices"], DeviceKind(w["kind"]),
                                      w["step_time_s"], None if w["resident"] is None else self.trials[w["resident"]],
                                      w["retired"], w["idle"]) for w in d["workers"]]

    @property
    def workers(self) -> Sequence[FrozenWorker]:
        return self._workers

    @property
    def interval(self) -> int:
        return int(self.data["interval"])

    @property
    def target_reached(self) -> bool:
        return bool(self.data["target_reached"])

    @property
    def remaining_iterations(self) -> int:
        return int(self.data["remaining_iterations"])

    def peek(self, ordering: Ordering, skip: set[int] | None = None) -> FrozenTrial | None:
        runnable = [t for t in self.trials.values() if t.status.runnable and not (skip and t.id in skip)]
        key: Any = ordering_keys(self.mode)[Ordering(ordering)]
        return min(runnable, key=key, default=None)

    def fastest_step_time_s(self) -> float:
        return float(self.data["fastest_step_time_s"])

    def at_perturbation_point(self, trial: int) -> bool:
        return self.trials[trial].at_point

    def starting(self) -> Sequence[FrozenTrial]:
        return [self.trials[i] for i in self.data["starting"]]

    def least_progressed_starting(self) -> FrozenTrial | None:
        return min(self.starting(), key=lambda t: (t.iteration, t.id), default=None)


@dataclass
class Replay:
    """What a replay found: questions asked again, answered as recorded, and the first that was not.

    Attributes:
        asked: questions put again (a repeated question counts each time).
        matched: of those, answered exactly as recorded.
        first_mismatch: (log line, recorded answer, answer now), or None.
    """

    asked: int = 0
    matched: int = 0
    first_mismatch: tuple[int, Any, Any] | None = None

    @property
    def exact(self) -> bool:
        return self.asked == self.matched


def read_view_log(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, records) of a view log; ValueError naming the line of a broken one."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"line {n}: not JSON") from None
    if not rows or rows[0].get("kind") != "header" or rows[0].get("format") != FORMAT:
        raise ValueError(f"line 1: not a hetune view log of format {FORMAT}")
    return rows[0], rows[1:]


def replay(strategy: Strategy, records: Sequence[dict[str, Any]], mode: str) -> Replay:
    """Put a log's questions, in order, to ``strategy`` (a fresh object of the logged strategy).

    Chunk reports are passed on as they came, since strategies learn from them (hrfs times workers).
    """
    out = Replay()
    for line, rec in enumerate(records, start=2):
        view = FrozenView(rec["view"], mode)
        worker = view.workers[rec["worker"]]
        if rec["kind"] == "chunk":
            strategy.on_chunk(worker, view.trials[rec["trial"]], rec["iterations"], rec["seconds"], view)
            continue
        for _ in range(rec["times"]):
            answer = encode_decision(strategy.assign(worker, view))
            out.asked += 1
            if answer == rec["decision"]:
                out.matched += 1
            elif out.first_mismatch is None:
                out.first_mismatch = (line, rec["decision"], answer)
    return out
