"""``hrfs``: Heterogeneous Resource Fusion Scheduling, the original system's scheduler.

Workers are carved per node from a RESOURCE_ALLOCATION-like table (CPUs per
worker; a GPU node gives one worker per GPU). Every worker's first assignment
is a half interval; its ability is ceil(its seconds per iteration / the
fastest worker's), 1 = as fast as the fastest. Strong workers take the
least-progressed trial from the queue for a full interval; weak workers
(ability >= ``weak_ability``) take the most-progressed trial for a half
interval, and are retired once any trial reaches the target accuracy or late
in the run, when the strong workers alone would finish the remaining
iterations before a weak worker finishes one half interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Iterator

from hetune.sim.cluster import ClusterConfig, NodeGroup, WorkerSpec, carve_workers
from hetune.sim.strategies import register
from hetune.sim.strategies.base import (Ordering, IDLE, RETIRE, Decision, Run, SimView, StepTimeFn, Strategy, TrialView,
                                        WorkerView)


@dataclass(frozen=True)
class HRFSParams:
    """HRFS settings.

    Args:
        resource_allocation: node (or node group) name -> CPUs per worker on that node;
            nodes not listed use their ``worker_cpus``.
        weak_ability: ability at or above which a worker is weak.
    """

    resource_allocation: dict[str, int] = field(default_factory=dict)
    weak_ability: int = 3

    def check(self) -> Iterator[tuple[str, str]]:
        for node, size in self.resource_allocation.items():
            if size < 1:
                yield f"resource_allocation.{node}", f"must be >= 1 CPU, got {size}"
        if self.weak_ability < 2:
            yield "weak_ability", f"must be >= 2, got {self.weak_ability}"


@register
class HRFS(Strategy):
    name = "hrfs"
    summary = "HRFS: workers sized per node, ability from a first half interval, strong/weak roles"
    Params = HRFSParams

    def __init__(self, params: HRFSParams | None = None) -> None:
        super().__init__(params or HRFSParams())
        self._sec_per_iter: dict[int, float] = {}
        self._fastest = math.inf  # the least of _sec_per_iter: abilities in O(1)
        self._rate: tuple[tuple[int, float], float] | None = None  # (what it was computed from, strong rate)

    def workers(self, cluster: ClusterConfig, step_time_s: StepTimeFn) -> list[WorkerSpec]:
        """One worker per GPU; a CPU node's workers get the cores its RESOURCE_ALLOCATION row names
        (by node, else by group, else the group's worker_cpus), at most the node's cores."""
        allocation = self.params.resource_allocation

        def cores(node: str, g: NodeGroup) -> int:
            return min(allocation.get(node, allocation.get(g.name, g.worker_size)), g.cpus)

        return carve_workers(cluster, cores=cores)

    def on_chunk(self, worker: WorkerView, trial: TrialView, iterations: int, seconds: float, view: SimView) -> None:
        if worker.id not in self._sec_per_iter:
            self._sec_per_iter[worker.id] = seconds / iterations
            self._fastest = min(self._fastest, seconds / iterations)

    def ability(self, worker_id: int) -> int:
        """ceil(seconds per iteration / fastest measured); 1 until measured."""
        mine = self._sec_per_iter.get(worker_id)
        if mine is None:
            return 1
        return max(1, math.ceil(mine / self._fastest - 1e-9))

    def _strong_rate(self, view: SimView) -> float:
        """Iterations per second of the strong workers together.

        Recomputed only when a worker is first measured or the fastest changes (O(workers) then, not at
        every weak worker's question): abilities only grow as the fastest falls, so a retired worker (weak
        when retired) stays weak and out of the sum, and nothing else it reads changes."""
        key = (len(self._sec_per_iter), self._fastest)
        if self._rate is None or self._rate[0] != key:
            rate = sum(1.0 / w.step_time_s for w in view.workers
                       if not w.retired and self.ability(w.id) < self.params.weak_ability)
            self._rate = (key, rate)
        return self._rate[1]

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        half = max(1, view.interval // 2)
        if worker.id not in self._sec_per_iter:
            t = view.peek(Ordering.LEAST_PROGRESSED)
            return IDLE if t is None else Run(t.id, half)
        if self.ability(worker.id) >= self.params.weak_ability:
            rate = self._strong_rate(view)
            if view.target_reached or (rate > 0 and view.remaining_iterations / rate <= half * worker.step_time_s):
                return RETIRE
            t = view.peek(Ordering.MOST_PROGRESSED)
            return IDLE if t is None else Run(t.id, half)
        t = view.peek(Ordering.LEAST_PROGRESSED)
        return IDLE if t is None else Run(t.id, view.interval)

    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        # Idle only when no trial is runnable: then every worker gets it
        return 0
