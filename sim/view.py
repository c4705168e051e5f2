"""The read-only view of a running simulation that strategies see (sim.strategies.base.SimView)."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Sequence

from hetune.sim.runnable import Ordering

if TYPE_CHECKING:
    from hetune.sim.engine import Simulation
    from hetune.sim.state import Trial, Worker


class EngineView:
    """The SimView the engine hands to strategies: only what strategies read.

    Args:
        sim: the running simulation.
    """

    def __init__(self, sim: "Simulation") -> None:
        self._sim = sim

    @property
    def workers(self) -> list[Worker]:
        return self._sim.workers

    @property
    def interval(self) -> int:
        # With time_attr = time_total_s the interval is seconds: a chunk then runs to the next
        # checkpoint, and the engine ends it early where the trial's seconds reach a perturbation point.
        pbt = self._sim.pbt
        if pbt.time_attr == "training_iteration":
            return pbt.perturbation_interval
        return self._sim.info.checkpoint_interval

    def at_perturbation_point(self, trial: int) -> bool:
        return self._sim.trials[trial].at_point

    @property
    def target_reached(self) -> bool:
        return self._sim.time_to_target is not None

    @property
    def remaining_iterations(self) -> int:
        return self._sim.remaining

    def peek(self, ordering: Ordering, skip: set[int] | None = None) -> Trial | None:
        return self._sim.runnable.peek(ordering, skip)  # type: ignore[return-value]

    def fastest_step_time_s(self) -> float:
        return self._sim.fastest_step

    def starting(self) -> Sequence[Trial]:
        return [self._sim.trials[t] for t in sorted(self._sim.starting)]

    def least_progressed_starting(self) -> Trial | None:
        i = self._sim.starting.first()
        return None if i is None else self._sim.trials[i]


class StartingSet(set[int]):
    """Trials whose process is starting on a worker (Tune: PENDING), with the least progressed found in
    O(log n): a lazy heap of (iteration, id) (a starting trial does not train, so its key holds).

    Args:
        trials: every trial of the run, by id (their iterations when they start).
    """

    def __init__(self, trials: Sequence[Trial]) -> None:
        super().__init__()
        self._trials = trials
        self._heap: list[tuple[int, int]] = []

    def add(self, trial: int) -> None:
        if trial not in self:
            super().add(trial)
            heapq.heappush(self._heap, (self._trials[trial].iteration, trial))

    def first(self) -> int | None:
        """The id of the starting trial with the least (iteration, id), or None."""
        heap = self._heap
        while heap:
            it, i = heap[0]
            if i in self and self._trials[i].iteration == it:
                return i
            heapq.heappop(heap)  # it started, or its key changed (it failed and was re-added)
        return None
