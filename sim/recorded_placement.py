"""Ray's node placement of a recorded run as an input of its replay (issue "Fidelity you can audit",
item 2b, for ``validate --plain`` runs).

A plain run asks no strategy: Tune picks the trial to run (Ray's PBT's ``choose_trial_to_run``, which
the ``tune-default`` strategy models) and Ray's scheduler picks the node, by rules the simulator does
not model (the engine offers work to idle workers in id order). ``RecordedPlacement`` wraps the
strategy: its choice of trial stands where the run started that trial on the asking worker next (the
record of each trial's starts and restarts, in order, from its ``trial_start`` and ``resume`` events);
where the run started it elsewhere, the asking worker takes the trial the run started on it next, if
that one can run now, and waits otherwise (Tune's pick goes where Ray put it, and Ray filled this
worker with another trial). Trials the record has no more starts for run wherever the strategy says.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from hetune.sim.cluster import ClusterConfig, WorkerSpec
from hetune.sim.strategies.base import (IDLE, Decision, Ordering, Run, SimView, StepTimeFn, Strategy, TrialView,
                                        WorkerView)


class RecordedPlacement(Strategy):
    """``inner``'s decisions, each run on the worker the recorded run used for that start.

    Args:
        inner: the strategy that picks trials (a fresh object).
        events: the recorded run's event log (sim/events.py).
    """

    def __init__(self, inner: Strategy, events: list[dict[str, Any]]) -> None:
        super().__init__(inner.params)
        self.inner = inner
        self.name, self.pbt, self.asks_when_started = inner.name, inner.pbt, inner.asks_when_started  # type: ignore[misc]
        self.where: dict[int, deque[int]] = defaultdict(deque)  # trial -> workers of its starts, in order
        self.onto: dict[int, list[int]] = defaultdict(list)  # worker -> trials started on it, in order
        for e in events:
            if e["kind"] in ("trial_start", "resume") and e.get("worker") is not None:
                self.where[int(e["trial"])].append(int(e["worker"]))
                self.onto[int(e["worker"])].append(int(e["trial"]))
        self.held = 0  # answers turned into IDLE: the trial waits for its recorded worker

    def workers(self, cluster: ClusterConfig, step_time_s: StepTimeFn) -> list[WorkerSpec]:
        return self.inner.workers(cluster, step_time_s)

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        d = self.inner.assign(worker, view)
        if not isinstance(d, Run):
            return d
        if worker.resident is not None and worker.resident.id == d.trial and not d.restart:
            return d  # continued in memory: no start, no placement
        queue = self.where.get(d.trial)
        if queue and queue[0] != worker.id:
            mine = next((t for t in self.onto.get(worker.id, []) if self.where[t] and self.where[t][0] == worker.id),
                        None)
            others = set(self.where) - {mine}
            first = None if mine is None else view.peek(Ordering.LEAST_PROGRESSED, skip=others)
            if first is None or first.id != mine:  # this worker's next trial in the run cannot run now
                self.held += 1
                return IDLE
            assert mine is not None
            d = Run(mine, d.iterations, restart=worker.resident is not None and worker.resident.id == mine)
        if self.where.get(d.trial):
            self.where[d.trial].popleft()
            self.onto[worker.id].remove(d.trial)
        return d

    def on_chunk(self, worker: WorkerView, trial: TrialView, iterations: int, seconds: float, view: SimView) -> None:
        self.inner.on_chunk(worker, trial, iterations, seconds, view)
