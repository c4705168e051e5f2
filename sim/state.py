"""What the engine keeps about trials, workers and checkpoints, and what a run returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hetune.sim.enums import DeviceKind, TrialStatus
from hetune.sim.errors import RunFailed
from hetune.sim.throughput import DeviceModel


class SimulationError(RunFailed):
    """The run could not complete (e.g. a strategy left trials unfinished): one line, exit status 1."""


@dataclass
class Checkpoint:
    """A saved trial state: where it lies and what it holds."""

    iteration: int
    progress: Any  # the learning model's state (sim/learning.py): immutable, so checkpoints share it
    config: dict[str, float]
    node: str
    accuracy: float | None = None  # the last evaluation it holds (the trainable saves it with the weights)
    time_total_s: float = 0.0  # Ray's time_total_s at the save (a Trainable restores it with the weights)


@dataclass(eq=False)
class Trial:
    """One PBT trial's state inside the engine."""

    id: int
    config: dict[str, float]
    rng: np.random.Generator
    iteration: int = 0
    progress: Any = 0.0  # the learning model's state; the engine sets the model's initial state
    accuracy: float | None = None
    status: TrialStatus = TrialStatus.PENDING
    started: bool = False
    resident: "Worker | None" = None
    ckpt: Checkpoint | None = None
    last_perturbation: float = 0  # in pbt.time_attr units (Ray's last_perturbation_time)
    time_total_s: float = 0.0  # accumulated seconds in training steps (Ray's time_total_s)
    # Ray Tune's PBT state: the checkpoint kept at the trial's last perturbation point when it was in
    # the top quantile there (what a donor hands over), else None
    pbt_ckpt: Checkpoint | None = None
    at_point: bool = False  # its last chunk ended at a PBT perturbation point
    version: int = 0
    last_step_s: float | None = None  # step time of the worker it last ran on
    step_factor: float = 1.0  # multiplies its step time once a move hook made its steps costlier


@dataclass(eq=False)
class Worker:
    """A worker inside the engine."""

    id: int
    node: str
    device: str
    devices: int
    kind: DeviceKind
    model: DeviceModel
    step_time_s: float
    resident: Trial | None = None
    retired: bool = False
    idle: bool = True
    down: bool = False  # its node failed and has not come back (sim/faults.py)
    inflight: tuple[float, float, int] | None = None  # compute in flight: (started at s, s per iteration, iterations)


@dataclass
class SimResult:
    """Events of a run and the trials' final states."""

    events: list[dict[str, Any]]
    trials: list[Trial]
    workers: list[Worker]
