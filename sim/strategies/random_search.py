"""``random-search``: the no-PBT baseline, so that the gain of each PBT strategy is visible.

The population's initial configurations (the same ones every strategy starts from, for a seed)
are trained as they are: no ranking, no exploit, no explore. Workers are carved as Ray Tune
would by default (one per GPU, CPU nodes by worker_cpus) and ordered fastest first, so the
first trials go to the fastest devices; a worker keeps its trial until the trial stops (at the
target accuracy or its stop iteration) and then takes the next trial nobody has started. A trial
never moves, so no checkpoint is restored except after a failure. In Ray Tune terms: a
FIFOScheduler over trials with fixed resources, where the fastest free slot starts the next trial.
"""

from __future__ import annotations

from typing import Hashable

from hetune.sim.cluster import ClusterConfig, WorkerSpec, default_workers
from hetune.sim.strategies import register
from hetune.sim.strategies.base import (IDLE, Decision, Ordering, Run, SimView, StepTimeFn, Strategy, TrialStatus,
                                        WorkerView)


@register
class RandomSearch(Strategy):
    name = "random-search"
    summary = "no PBT: the initial configurations trained as they are, fastest devices first"
    pbt = False

    def workers(self, cluster: ClusterConfig, step_time_s: StepTimeFn) -> list[WorkerSpec]:
        # Both engines offer work to free workers in id order: fastest first puts the first
        # trials on the fastest devices. sorted() is stable, so equal workers keep cluster order.
        return sorted(default_workers(cluster), key=lambda s: step_time_s(s.device, s.devices))

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        r = worker.resident
        if r is not None and r.status == TrialStatus.PAUSED:  # its chunk ended at a checkpoint: go on
            return Run(r.id, view.interval)
        t = view.peek(Ordering.FIFO)
        return IDLE if t is None else Run(t.id, view.interval)

    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        # Idle only when no trial is runnable: then every worker gets it
        return 0
