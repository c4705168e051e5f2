"""How a strategy runs for real: the scheduler Tune runs, the resources trials start with, and the
slot resources each node must carry.

Every strategy runs through ``StrategyScheduler`` (real/strategy_scheduler.py), driven by the very
strategy object the simulator uses. ``plain`` is the reference run of Ray Tune's own PBT scheduling
with no adapter (tune-default only): the ground truth for the simulator's model of Ray itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from hetune.sim.cluster import ClusterConfig, WorkerSpec
from hetune.sim.enums import DeviceKind
from hetune.sim.errors import ConfigError
from hetune.sim.strategies.base import Strategy


@dataclass
class Placement:
    """Resources per trial, the scheduler built around PBT, and the slot resources per node.

    Args:
        resources: Ray resources each trial requests at start ({"CPU": 1}, {"GPU": 1}, ...); a
            StrategyScheduler replaces them before a trial first starts.
        wrap: builds the scheduler Tune runs from the PBT scheduler (and, for StrategyScheduler, its
            other arguments: interval, mode, stop_iterations, target_accuracy, on_pause, checkpoint_interval,
            on_decision).
        node_resources: node name -> custom resources it must declare (the workers' slots).
    """

    resources: dict[str, float]
    wrap: Callable[..., Any]
    node_resources: dict[str, dict[str, float]] = field(default_factory=dict)


def _trial_cpus(cluster: ClusterConfig) -> int:
    sizes = [g.worker_size for _, g in cluster.node_names() if cluster.device_kind(g.device) == DeviceKind.CPU]
    return min(sizes) if sizes else 1


def placement(strategy: Strategy, cluster: ClusterConfig, workers: list[WorkerSpec],
              step_time_s: Callable[[str, int], float], plain: bool = False) -> Placement:
    """How ``strategy`` runs on ``cluster``.

    Args:
        strategy: a fresh strategy instance.
        cluster: the cluster config.
        workers: the strategy's workers (slots).
        step_time_s: seconds per iteration for (device type, devices), from the calibration.
        plain: Ray Tune's own PBT scheduling, no adapter (only for a strategy that is Ray's own).
    """
    has_gpu = any(cluster.device_kind(w.device) == DeviceKind.GPU for w in workers)
    base = {"GPU": 1.0} if has_gpu else {"CPU": float(_trial_cpus(cluster))}
    if plain:
        if not strategy.ray_native:
            raise ConfigError("--plain", "", f"is Ray Tune's own scheduling, the reference for tune-default; "
                              f"it cannot run {strategy.name}")
        return Placement(base, lambda pbt, **_: pbt)
    from hetune.real.strategy_scheduler import StrategyScheduler, node_resources

    return Placement(base, lambda pbt, **args: StrategyScheduler(strategy, workers, step_time_s, cluster.device_kind,
                                                                 pbt, **args),
                     node_resources(workers))
