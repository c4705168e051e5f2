"""How a simulator strategy is run for real: Ray resource requests and scheduler, or why it cannot be.

- tune-default: every trial requests the same resources (1 GPU on GPU clusters, else the
  CPU nodes' worker size in cores); Ray places it on any node with room.
- rank-aware: Ray Tune's ResourceChangingScheduler around PBT moves trials between device
  types as they report: the best-ranked trials get the fastest type's ``device:<type>``
  resource, the rest the slower types (a trial whose placement changes restarts from
  its checkpoint on the new device).
Other strategies are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hetune.sim.cluster import ClusterConfig, WorkerSpec
from hetune.sim.errors import ConfigError

NOT_RUNNABLE = {
    "hrfs": "HRFS is its own loop of Ray tasks with half-interval chunks and worker retirement, "
            "which Ray Tune's trial model cannot express; validate supports tune-default and rank-aware",
    "throughput-proportional": "its chunks vary in length per device type, but Ray Tune's PBT perturbs "
                               "at one fixed interval; validate supports tune-default and rank-aware",
    "leader-fusion": "a fused multi-device data-parallel trial that follows the leader is not implemented "
                     "for real runs yet; validate supports tune-default and rank-aware",
}


@dataclass
class Placement:
    """Resources per trial and an optional wrapper around the PBT scheduler.

    Args:
        resources: Ray resources each trial requests at start ({"CPU": 1}, {"GPU": 1}, ...).
        wrap: builds the scheduler Tune runs from the PBT scheduler (identity for tune-default).
    """

    resources: dict[str, float]
    wrap: Callable[[Any], Any]


def _trial_cpus(cluster: ClusterConfig) -> int:
    sizes = [g.worker_size for _, g in cluster.node_names() if cluster.devices[g.device].kind == "cpu"]
    return min(sizes) if sizes else 1


def placement(strategy: str, cluster: ClusterConfig, workers: list[WorkerSpec],
              step_time_s: Callable[[str, int], float]) -> Placement:
    """Placement of ``strategy`` on ``cluster`` or ConfigError saying why it cannot run for real.

    Args:
        strategy: registered strategy name.
        cluster: the cluster config.
        workers: the strategy's workers (slots).
        step_time_s: seconds per iteration for (device type, devices), from the calibration.
    """
    if strategy in NOT_RUNNABLE:
        raise ConfigError("--strategy", "", f"{strategy} cannot run for real: {NOT_RUNNABLE[strategy]}")
    has_gpu = any(cluster.devices[w.device].kind == "gpu" for w in workers)
    base = {"GPU": 1.0} if has_gpu else {"CPU": float(_trial_cpus(cluster))}
    if strategy == "tune-default":
        return Placement(base, lambda pbt: pbt)
    if strategy == "rank-aware":
        return Placement(base, lambda pbt: _rank_aware(pbt, workers, step_time_s, base))
    raise ConfigError("--strategy", "", f"{strategy} has no real placement")


def _rank_aware(pbt: Any, workers: list[WorkerSpec], step_time_s: Callable[[str, int], float],
                base: dict[str, float]) -> Any:
    from ray.tune.execution.placement_groups import PlacementGroupFactory
    from ray.tune.schedulers import ResourceChangingScheduler

    # Device types fastest first, with how many slots each has.
    order = sorted({w.device for w in workers}, key=lambda d: step_time_s(d, 1))
    slots = {d: sum(1 for w in workers if w.device == d) for d in order}

    def allocate(controller: Any, trial: Any, result: dict, scheduler: Any) -> Any:
        scores = []
        for t in controller.get_trials():
            last = t.last_result or {}
            if not t.is_finished() and "accuracy" in last:
                scores.append((-float(last["accuracy"]), str(t.trial_id)))
        scores.sort()
        rank = next((k for k, (_, tid) in enumerate(scores) if tid == str(trial.trial_id)), len(scores))
        seen = 0
        for d in order:  # the best `slots[fastest]` trials on the fastest type, and so on
            seen += slots[d]
            if rank < seen:
                break
        return PlacementGroupFactory([dict(base, **{f"device:{d}": 1.0})])

    return ResourceChangingScheduler(base_scheduler=pbt, resources_allocation_function=allocate)
