"""The read-only view of a running simulation that strategies see (clock, workers, trials, queues)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetune.sim.engine import Simulation, Trial, Worker


class EngineView:
    """The read-only SimView (sim.strategies.base) handed to strategies.

    Args:
        sim: the running simulation.
    """

    def __init__(self, sim: "Simulation") -> None:
        self._sim = sim

    @property
    def now(self) -> float:
        return self._sim.env.now

    @property
    def workers(self) -> list[Worker]:
        return self._sim.workers

    @property
    def trials(self) -> list[Trial]:
        return self._sim.trials

    @property
    def stop_iterations(self) -> int:
        return self._sim.stop_iterations

    @property
    def interval(self) -> int:
        return self._sim.pbt.perturbation_interval

    @property
    def target_reached(self) -> bool:
        return self._sim.time_to_target is not None

    @property
    def remaining_iterations(self) -> int:
        return self._sim.remaining

    @property
    def runnable_count(self) -> int:
        return len(self._sim.runnable)

    @property
    def unfinished_count(self) -> int:
        return self._sim.unfinished

    def peek(self, ordering: str, skip: set[int] | None = None) -> Trial | None:
        return self._sim.runnable.peek(ordering, skip)  # type: ignore[return-value]

    def rank_position(self, trial_id: int) -> int:
        return self._sim.ranking.position(trial_id)

    def ranked_count(self) -> int:
        return len(self._sim.ranking)

    def fastest_step_time_s(self) -> float:
        return self._sim.fastest_step
