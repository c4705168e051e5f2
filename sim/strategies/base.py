"""The strategy interface: a few hooks with no-op defaults, as Ray Tune's schedulers have.

The engine asks a strategy two things: which workers exist (``workers``) and,
each time a worker is free, what it does next (``assign``). A strategy sees
the run only through ``SimView`` (read-only) and answers with a decision; it
never touches engine internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Hashable, Protocol, Sequence

from hetune.sim.cluster import ClusterConfig, WorkerSpec, default_workers
from hetune.sim.enums import DeviceKind, Ordering, TrialStatus

__all__ = ["Ordering", "TrialStatus", "DeviceKind", "Strategy", "Run", "Idle", "Retire", "Decision", "IDLE", "RETIRE",
           "SimView", "TrialView", "WorkerView", "StepTimeFn"]


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
    def status(self) -> TrialStatus: ...


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
    def kind(self) -> DeviceKind: ...
    @property
    def step_time_s(self) -> float: ...
    @property
    def resident(self) -> TrialView | None: ...
    @property
    def retired(self) -> bool: ...
    @property
    def idle(self) -> bool: ...


class SimView(Protocol):
    """Read-only view of a run that strategies see: only what they read, so that the Ray Tune
    adapter can build the same view from Tune's trials."""

    @property
    def workers(self) -> Sequence[WorkerView]:
        """Every worker carved, retired ones included, by id."""
    @property
    def interval(self) -> int:
        """Iterations a chunk runs for: PBT's perturbation interval (time_attr = training_iteration),
        or the checkpoint interval where the perturbation interval is seconds (time_total_s)."""
    @property
    def target_reached(self) -> bool:
        """Whether some trial has reached the target accuracy."""
    @property
    def remaining_iterations(self) -> int:
        """Iterations the unfinished trials still have to run, summed."""
    def peek(self, ordering: Ordering, skip: set[int] | None = None) -> TrialView | None:
        """The first runnable trial in ``ordering`` (not removed), passing over ``skip``; None if none."""
    def fastest_step_time_s(self) -> float:
        """Seconds per iteration of the fastest worker."""
    def at_perturbation_point(self, trial: int) -> bool:
        """Whether ``trial``'s last chunk ended at one of its PBT perturbation points."""
    def starting(self) -> Sequence[TrialView]:
        """Trials that a worker is starting (their process is starting: Ray Tune's
        ``PENDING`` status, which makes Ray's PBT pause a trial at its perturbation point)."""
    def least_progressed_starting(self) -> TrialView | None:
        """The starting trial with the least (iteration, id), or None (tune-default asks at every question)."""


@dataclass(frozen=True)
class Run:
    """Run ``trial`` for up to ``iterations`` iterations (the engine stops a chunk at checkpoints).

    Args:
        trial: trial id; must be runnable.
        iterations: iterations wanted, >= 1.
        restart: restart the trial's process from its checkpoint even when this worker holds it in
            memory (Ray Tune's PBT pauses a trial at a perturbation point whenever others wait).
    """

    trial: int
    iterations: int
    restart: bool = False


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
    # True where Ray Tune's own PBT scheduling is this strategy, so that a real run without the
    # strategy adapter (validate --plain) is its reference
    ray_native: ClassVar[bool] = False
    # False for a baseline without PBT: neither engine ranks, exploits or explores its trials
    pbt: ClassVar[bool] = True
    # True where the strategy leaves workers idle while a trial is starting (SimView.starting) and
    # must be asked again once it is up (Ray Tune stages a paused trial only after its pick is up)
    asks_when_started: ClassVar[bool] = False

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

    # Overriding idle_group is the hint; the base class's (never called) means no promise.
    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        """The group of idle workers that ``assign`` treats alike when it answers Idle.

        The promise: while nothing in the run changes, if ``assign`` answers ``Idle`` to one idle
        worker of a group, it answers ``Idle`` to every idle worker of that group. The simulator
        then asks one worker of a group and skips the rest until something changes (a trial is
        reserved, a worker retires, a chunk ends), so a large cluster of idle workers costs O(1)
        questions per chunk (sim/idle.py). Asked once each time a worker goes idle; the worker keeps
        the group while idle. A strategy that does not override it is asked for every idle worker;
        the Ray Tune adapter asks every free slot whatever the hint. Tests check each strategy's
        hint by asking every skipped worker (``Simulation.hints = "verify"``).
        """
        raise NotImplementedError


def fast_half(workers: Sequence[WorkerView]) -> set[int]:
    """Ids of the workers in the faster half by step time (the median included)."""
    times = sorted(w.step_time_s for w in workers)
    median = times[(len(times) - 1) // 2]
    return {w.id for w in workers if w.step_time_s <= median}
