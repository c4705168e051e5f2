"""Node failures in the simulator, replayed as Ray Tune handles them.

An experiment's ``[faults]`` table declares how nodes fail:

- ``[faults.devices.<type>]``: every node of that device type fails after an exponentially
  distributed uptime of mean ``mtbf_s`` seconds (spot preemption and crashes are memoryless to a
  first approximation) and its replacement joins ``replace_s`` seconds later, with the same devices;
- ``[[faults.trace]]``: node ``node`` fails at ``t_s`` seconds and comes back after ``down_s``
  seconds (absent: lost for good).

What a failure does, as Ray Tune with ``FailureConfig(max_failures)`` and trials that checkpoint:
every worker of the node goes away (``worker_removed``; its device-hours stop counting); a trial
running there loses the work since its last checkpoint (a ``failure`` event with the iterations
lost: the chunk in flight, or a finished chunk whose save had not completed) and becomes runnable
again, so the strategy restarts it on another free worker from that checkpoint (start, copy and
load charged as any restart); a trial that fails more than ``experiment.max_failures`` times stops
for good (reason ``failed``). A trial that was only held in memory there loses nothing: its state
was saved at its last chunk end. Checkpoints are assumed to live in the run's storage (Ray syncs
them there), so a lost node's checkpoints survive it.

Failure times depend only on the experiment's fault seed, the run's seed and the node, so every
strategy of a sweep meets the same failures at the same times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from hetune.sim.errors import ConfigError
from hetune.sim.state import Trial, Worker

if TYPE_CHECKING:
    import simpy

    from hetune.sim.cluster import ClusterConfig
    from hetune.sim.idle import IdleWorkers
    from hetune.sim.view import StartingSet


@dataclass(frozen=True)
class DeviceFaults:
    """How nodes of one device type fail.

    Args:
        mtbf_s: mean seconds a node runs between failures (exponential uptimes).
        replace_s: seconds from a failure until the replacement node joins.
    """

    mtbf_s: float
    replace_s: float

    def check(self) -> Iterator[tuple[str, str]]:
        if self.mtbf_s <= 0:
            yield "mtbf_s", f"must be > 0 seconds, got {self.mtbf_s}"
        if self.replace_s < 0:
            yield "replace_s", f"must be >= 0 seconds, got {self.replace_s}"


@dataclass(frozen=True)
class FailureAt:
    """One failure of a trace.

    Args:
        t_s: seconds since the run started.
        node: the node's name in the cluster file.
        down_s: seconds until it comes back (absent: lost for good).
    """

    t_s: float
    node: str
    down_s: float | None = None

    def check(self) -> Iterator[tuple[str, str]]:
        if self.t_s < 0:
            yield "t_s", f"must be >= 0 seconds, got {self.t_s}"
        if self.down_s is not None and self.down_s < 0:
            yield "down_s", f"must be >= 0 seconds, got {self.down_s}"


@dataclass(frozen=True)
class FaultsConfig:
    """The experiment's ``[faults]`` table (none by default).

    Args:
        devices: device type -> its failure model.
        trace: failures at given times.
        seed: seed of the drawn uptimes (combined with each run's seed).
    """

    devices: dict[str, DeviceFaults] = field(default_factory=dict)
    trace: list[FailureAt] = field(default_factory=list)
    seed: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.devices or self.trace)

    def check(self) -> Iterator[tuple[str, str]]:
        if self.seed < 0:
            yield "seed", f"must be >= 0, got {self.seed}"


def check_faults(faults: FaultsConfig, cluster: "ClusterConfig", where: str) -> None:
    """Raise ConfigError when ``faults`` names a device type or node the cluster lacks."""
    nodes = {name for name, _ in cluster.node_names()}
    for dev in faults.devices:
        if dev not in cluster.devices:
            raise ConfigError(where, f"faults.devices.{dev}", f"no device type {dev!r} in the cluster "
                              f"(it has {', '.join(sorted(cluster.devices))})")
    for i, f in enumerate(faults.trace):
        if f.node not in nodes:
            raise ConfigError(where, f"faults.trace[{i}].node", f"no node {f.node!r} in the cluster "
                              f"(it has {', '.join(sorted(nodes))})")


def node_outages(faults: FaultsConfig, cluster: "ClusterConfig", seed: int) -> dict[str, Any]:
    """Node name -> an iterator of (seconds up before failing, seconds down; None = for good).

    Drawn per node from its own stream, so the outages do not depend on the strategy.
    """
    out: dict[str, Any] = {}
    traced: dict[str, list[FailureAt]] = {}
    for f in sorted(faults.trace, key=lambda f: f.t_s):
        traced.setdefault(f.node, []).append(f)
    for index, (name, group) in enumerate(cluster.node_names()):
        if name in traced:
            out[name] = _trace_outages(traced[name])
        elif group.device in faults.devices:
            rng = np.random.default_rng([faults.seed, seed, index])
            out[name] = _drawn_outages(faults.devices[group.device], rng)
    return out


def _trace_outages(failures: list[FailureAt]) -> Iterator[tuple[float, float | None]]:
    up_since = 0.0
    for f in failures:
        if f.t_s < up_since:
            continue  # fails again while already down: the earlier outage covers it
        yield f.t_s - up_since, f.down_s
        if f.down_s is None:
            return
        up_since = f.t_s + f.down_s


def _drawn_outages(model: DeviceFaults, rng: np.random.Generator) -> Iterator[tuple[float, float | None]]:
    while True:
        yield float(rng.exponential(model.mtbf_s)), model.replace_s


class FaultSteps:
    """Node failures inside the engine, a mixin of ``Simulation`` (sim.engine): it reads ``env``,
    ``workers``, ``trials``, ``unfinished``, ``remaining``, ``info``, ``_idle`` and ``_procs`` and calls
    ``_emit``, ``_make_runnable``, ``_stop`` and ``_dispatch``."""

    env: "simpy.Environment"
    workers: list[Worker]
    _idle: IdleWorkers
    _procs: dict[int, Any]
    if TYPE_CHECKING:  # the rest of Simulation's state and steps that these read and call
        trials: list[Trial]
        unfinished: int
        remaining: int
        starting: StartingSet
        info: Any
        model: Any

        def _emit(self, kind: str, trial: Trial | None = None, worker: Worker | None = None, **extra: Any) -> None: ...
        def _dispatch(self) -> None: ...
        def _stop(self, t: Trial, w: Worker, reason: str) -> None: ...
        def _make_runnable(self, t: Trial) -> None: ...

    def _start_faults(self, faults: FaultsConfig, cluster: "ClusterConfig", seed: int) -> None:
        self._trial_failures: dict[int, int] = {}
        self._coming_back = 0  # nodes down that will come back
        for node, outages in node_outages(faults, cluster, seed).items():
            on_node = [w for w in self.workers if w.node == node]
            if on_node:
                self.env.process(self._node_life(on_node, outages))

    def _node_life(self, workers: list[Worker], outages: Iterator[tuple[float, float | None]]):
        for up_s, down_s in outages:
            yield self.env.timeout(up_s)
            if not self.unfinished or not self._anything_moves():
                return  # the run ended (or stalled): no more failures to replay
            for w in workers:
                self._lose_worker(w)
            if down_s is None:
                return
            self._coming_back += 1
            yield self.env.timeout(down_s)
            self._coming_back -= 1
            for w in workers:
                if not w.retired:  # a worker the strategy retired before the failure stays retired
                    w.down = False
                    w.idle = True
                    self._idle.add(w)
                    self._emit("worker_added", worker=w, devices=w.devices)
            self._dispatch()

    def _anything_moves(self) -> bool:
        """Whether the run can still change: a worker is busy or a lost node will come back."""
        return self._coming_back > 0 or any(not w.idle and not w.retired and not w.down for w in self.workers)

    def _lose_worker(self, w: Worker) -> None:
        if w.retired or w.down:
            return
        proc = self._procs.pop(w.id, None)
        if proc is not None and proc.is_alive:
            proc.interrupt("node lost")  # its trial's failure is handled in the process (_fail_trial)
        if w.resident is not None:  # held in memory only: its state was saved at its last chunk end
            w.resident.resident = None
            w.resident = None
        w.down = True
        w.idle = False
        self._idle.remove(w)
        self._emit("worker_removed", worker=w, devices=w.devices)

    def _fail_trial(self, t: Trial, w: Worker) -> None:
        """``t`` was on ``w`` when its node failed: back to its last checkpoint, or stopped for good."""
        lost = t.iteration - (t.ckpt.iteration if t.ckpt is not None else 0)
        self.starting.discard(t.id)  # it may have failed while its process was starting
        if w.inflight is not None:  # the chunk in flight: the iterations done so far are lost too
            started, step_s, k = w.inflight
            lost += min(k, int((self.env.now - started) / step_s))
        self.remaining += t.iteration - (t.ckpt.iteration if t.ckpt is not None else 0)
        if t.ckpt is not None:
            t.iteration, t.progress, t.accuracy = t.ckpt.iteration, t.ckpt.progress, t.ckpt.accuracy
            t.time_total_s = t.ckpt.time_total_s
            t.config = dict(t.ckpt.config)
        else:  # no checkpoint yet: Ray starts the trial again from scratch
            t.iteration, t.accuracy, t.started, t.time_total_s = 0, None, False, 0.0
            t.progress = self.model.initial_state(t)  # a fresh initialization (and seed luck)
        t.resident = None
        w.resident = None
        w.inflight = None
        n = self._trial_failures.get(t.id, 0) + 1
        self._trial_failures[t.id] = n
        self._emit("failure", t, w, reason="node lost", lost_iterations=lost)
        if n > self.info.max_failures:
            self._stop(t, w, "failed")
        else:
            self._make_runnable(t)
