"""``rank-aware``: the best-ranked trials run on the fastest devices.

Workers in the faster half (by step time) take the best-ranked runnable
trial; the slower half take the worst-ranked one (trials that never reported
rank last, so slow workers also start new trials). A trial keeps its worker
while it stays best-ranked among the runnable ones, so leaders do not pay
restore overhead.
"""

from __future__ import annotations

from typing import Hashable

from hetune.sim.strategies import register
from hetune.sim.strategies.base import Ordering, IDLE, Decision, Run, SimView, Strategy, WorkerView, fast_half


@register
class RankAware(Strategy):
    name = "rank-aware"
    summary = "best-ranked trials on the fastest devices, worst-ranked on the slowest"

    def __init__(self, params: object = None) -> None:
        super().__init__(params)
        self._fast: set[int] | None = None

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        if self._fast is None:
            self._fast = fast_half(view.workers)  # workers never change speed: compute once
        t = view.peek(Ordering.BEST_RANKED if worker.id in self._fast else Ordering.WORST_RANKED)
        return IDLE if t is None else Run(t.id, view.interval)

    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        # Idle only when no trial is runnable: then every worker gets it
        return 0
