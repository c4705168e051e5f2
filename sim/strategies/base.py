"""The strategy interface: a few hooks with no-op defaults, as Ray Tune's schedulers have.

The engine asks a strategy two things: which workers exist (``workers``) and,
each time a worker is free, what it does next (``assign``). A strategy sees
the run only through ``SimView`` (read-only) and answers with a decision; it
never touches engine internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, Sequence

from hetune.sim.cluster import ClusterConfig, WorkerSpec, default_workers


StepTimeFn = Callable[[str, int], float]


class TrialView(Protocol):
    """What a strategy may read about a trial."""

    @property
    def id(self) -> int: ...
    @property
    def iteration(self) -> int: ...
    @property
    def accuracy(self) -> float | None: ...
    @property
    def status(self) -> str: ...


class WorkerView(Protocol):
    """What a strategy may read about a worker."""

    @property
    def id(self) -> int: ...
    @property
    def node(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def devices(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def step_time_s(self) -> float: ...
    @property
    def resident(self) -> TrialView | None: ...
    @property
    def retired(self) -> bool: ...
    @property
    def idle(self) -> bool: ...


class SimView(Protocol):
    """Read-only view of the clock, cluster and population."""

    @property
    def now(self) -> float: ...
    @property
    def workers(self) -> Sequence[WorkerView]: ...
    @property
    def trials(self) -> Sequence[TrialView]: ...
    @property
    def stop_iterations(self) -> int: ...
    @property
    def interval(self) -> int: ...
    @property
    def target_reached(self) -> bool: ...
    @property
    def remaining_iterations(self) -> int: ...
    @property
    def runnable_count(self) -> int: ...
    @property
    def unfinished_count(self) -> int: ...
    def peek(self, ordering: str, skip: set[int] | None = None) -> TrialView | None: ...
    def rank_position(self, trial_id: int) -> int: ...
    def ranked_count(self) -> int: ...
    def fastest_step_time_s(self) -> float: ...


@dataclass(frozen=True)
class Run:
    """Run ``trial`` for up to ``iterations`` iterations (the engine stops a chunk at checkpoints).

    Args:
        trial: trial id; must be runnable.
        iterations: iterations wanted, >= 1.
    """

    trial: int
    iterations: int


@dataclass(frozen=True)
class Idle:
    """Nothing to do now; ask again when a trial becomes runnable."""


@dataclass(frozen=True)
class Retire:
    """Release this worker for good (its device-hours stop counting)."""


Decision = Run | Idle | Retire

IDLE = Idle()
RETIRE = Retire()


class Strategy:
    """Base class: subclasses set ``name`` and ``summary`` and override hooks.

    Args:
        params: this strategy's table from the experiment ([strategies.<name>]), validated
            against ``Params`` when the subclass defines one.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type | None] = None

    def __init__(self, params: Any = None) -> None:
        self.params = params

    def workers(self, cluster: ClusterConfig, step_time_s: StepTimeFn) -> list[WorkerSpec]:
        """Workers to carve from the cluster (default: one per GPU, CPU nodes by worker_cpus).

        Args:
            cluster: the cluster description.
            step_time_s: seconds per iteration of this experiment for (device type, devices).
        """
        return default_workers(cluster)

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        """What the free ``worker`` does next."""
        raise NotImplementedError

    def on_chunk(self, worker: WorkerView, trial: TrialView, iterations: int, seconds: float, view: SimView) -> None:
        """A chunk finished: ``iterations`` took ``seconds`` of compute. Default: nothing."""
