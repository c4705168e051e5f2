"""The strategy's view of a Ray Tune run: the same SimView protocol the simulator gives (sim.strategies.base).

Workers are Ray slots (one custom resource ``hetune-worker:<i>`` each); trials are Tune trials,
known by their creation index. Orderings use the simulator's own sort keys (sim.runnable), so
``peek`` answers as the engine's would for the same trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from hetune.sim.cluster import WorkerSpec
from hetune.sim.enums import DeviceKind, TrialStatus
from hetune.sim.runnable import Ordering, ordering_keys


def slot_resource(worker_id: int) -> str:
    """The Ray custom resource that pins a trial to worker ``worker_id`` (1 of it on the worker's node)."""
    return f"hetune-worker:{worker_id}"


@dataclass(eq=False)
class TrialState:
    """A Tune trial as a strategy sees it (TrialView).

    Args:
        id: the trial's creation index.
        iteration: training iterations done (Tune's training_iteration).
        accuracy: the last reported accuracy, None before the first.
        status: PENDING (never ran), PAUSED, RUNNING (or reserved for a slot), STOPPED.
    """

    id: int
    iteration: int = 0
    accuracy: float | None = None
    status: TrialStatus = TrialStatus.PENDING


@dataclass(eq=False)
class Slot:
    """A worker of the strategy, as a Ray slot (WorkerView), and what the scheduler knows of it.

    Args:
        id: worker id (its index in the strategy's worker list).
        spec: node, device type and devices of the worker.
        kind: what the worker holds (whole GPUs or cores).
        step_time_s: seconds per iteration predicted by the calibration.
    """

    id: int
    spec: WorkerSpec
    kind: DeviceKind
    step_time_s: float
    resident: TrialState | None = None  # the trial it last ran, while that trial waits paused
    retired: bool = False
    trial: Any = None  # the Tune trial running or reserved here
    chunk_len: int = 0  # iterations the strategy asked for
    chunk_start_iter: int | None = None  # where the chunk began; None until a restarted trial's first result
    reserved: bool = False  # chosen for this slot; starts once Tune has paused it elsewhere
    chunk_seconds: float = 0.0  # compute seconds of the chunk so far (step and evaluation), measured
    down: bool = False  # no live Ray node declares its slot (real/slot_liveness.py)

    @property
    def node(self) -> str:
        return self.spec.node

    @property
    def device(self) -> str:
        return self.spec.device

    @property
    def devices(self) -> int:
        return self.spec.devices

    @property
    def idle(self) -> bool:
        return self.trial is None and not self.retired and not self.down

    def resources(self) -> dict[str, float]:
        """What a trial placed here asks Ray for: the slot's token and its devices."""
        token = {slot_resource(self.id): 1.0}
        if self.kind == DeviceKind.GPU:
            return {"CPU": 1.0, "GPU": float(self.devices), **token}
        return {"CPU": float(self.devices), **token}


class TuneView:
    """The SimView over a Ray Tune run.

    Args:
        slots: the workers.
        trials: trial index -> its state.
        interval: PBT's perturbation interval, iterations.
        stop_iterations: a trial's iteration limit.
        mode: pbt.mode ("max" or "min").
    """

    def __init__(self, slots: list[Slot], trials: dict[int, TrialState], interval: int, stop_iterations: int,
                 mode: str) -> None:
        self._slots = slots
        self._trials = trials
        self._interval = interval
        self._stop = stop_iterations
        self.mode = mode
        self._keys = ordering_keys(mode)
        self.target = False  # set by the scheduler when a trial reaches the target accuracy

    @property
    def workers(self) -> list[Slot]:
        return self._slots

    @property
    def interval(self) -> int:
        return self._interval

    @property
    def target_reached(self) -> bool:
        return self.target

    @property
    def remaining_iterations(self) -> int:
        return sum(self._stop - t.iteration for t in self._trials.values() if t.status != TrialStatus.STOPPED)

    def peek(self, ordering: Ordering, skip: set[int] | None = None) -> TrialState | None:
        runnable = [t for t in self._trials.values()
                    if t.status.runnable and not (skip and t.id in skip)]
        key: Any = self._keys[Ordering(ordering)]  # typed for the simulator's trials; TrialState has the same fields
        return min(runnable, key=key, default=None)

    def fastest_step_time_s(self) -> float:
        return min(s.step_time_s for s in self._slots)

    def at_perturbation_point(self, trial: int) -> bool:
        return self._trials[trial].iteration % self._interval == 0

    def starting(self) -> Sequence[TrialState]:
        # The adapter decides every pause itself (StrategyScheduler.on_trial_result), so a trial whose
        # actor is starting does not make it pause another: nothing is starting as far as a strategy knows.
        return []

    def least_progressed_starting(self) -> TrialState | None:
        return None  # nothing is starting as far as a strategy knows (above)
