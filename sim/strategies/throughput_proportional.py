"""``throughput-proportional``: heterogeneity-aware time sharing in the style of Gavel.

Gavel equalises each job's progress rate across device types. Here every
trial is a job: a free worker always takes the least-progressed runnable
trial, and runs it for a chunk whose length is proportional to the worker's
throughput (a full interval on the fastest device type, a proportional share
on slower ones), so every chunk takes about the same wall time and all trials
advance at the same rate, each getting its share of fast and slow devices.
"""

from __future__ import annotations

from typing import Hashable

from hetune.sim.strategies import register
from hetune.sim.strategies.base import Ordering, IDLE, Decision, Run, SimView, Strategy, WorkerView


@register
class ThroughputProportional(Strategy):
    name = "throughput-proportional"
    summary = "Gavel-style: least-progressed trial next, chunk length proportional to device throughput"

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        t = view.peek(Ordering.LEAST_PROGRESSED)
        if t is None:
            return IDLE
        share = view.fastest_step_time_s() / worker.step_time_s
        return Run(t.id, max(1, round(view.interval * share)))

    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        # Idle only when no trial is runnable: then every worker gets it
        return 0
