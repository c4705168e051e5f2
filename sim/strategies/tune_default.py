"""``tune-default``: what Ray Tune does with PopulationBasedTraining out of the box.

Every trial asks for the same fixed resources (``gpus_per_trial`` GPUs, or on a
cluster without GPUs ``cpus_per_trial`` cores); a trial that asks for a GPU
cannot run on a CPU node, so CPU nodes stay unused on mixed clusters (Ray Tune
cannot mix CPU and GPU trials of one population by default). Trials are
placed FIFO. When there are more trials than slots, PBT pauses a trial at each
perturbation point if any trial is pending or paused, and the paused or
pending trial with the least progress runs next (``choose_trial_to_run``); a
paused trial's process has ended, so even when it is chosen again at once it
restarts from its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterator

from hetune.sim.cluster import ClusterConfig, NodeGroup, WorkerSpec, carve_workers
from hetune.sim.strategies import register
from hetune.sim.strategies.base import (Ordering, IDLE, Decision, DeviceKind, Run, SimView, StepTimeFn, Strategy,
                                        TrialStatus, WorkerView)


@dataclass(frozen=True)
class TuneDefaultParams:
    """Resources every trial requests.

    Args:
        gpus_per_trial: GPUs per trial; 0 runs trials on CPU nodes.
        cpus_per_trial: cores per trial on CPU nodes; 0 = each node's worker_cpus.
    """

    gpus_per_trial: int = 1
    cpus_per_trial: int = 0

    def check(self) -> Iterator[tuple[str, str]]:
        if self.gpus_per_trial < 0:
            yield "gpus_per_trial", f"must be >= 0, got {self.gpus_per_trial}"
        if self.cpus_per_trial < 0:
            yield "cpus_per_trial", f"must be >= 0, got {self.cpus_per_trial}"


@register
class TuneDefault(Strategy):
    name = "tune-default"
    summary = "Ray Tune's default: fixed resources per trial, FIFO, least-progressed paused trial runs next"
    Params = TuneDefaultParams
    ray_native = True
    asks_when_started = True

    def __init__(self, params: TuneDefaultParams | None = None) -> None:
        super().__init__(params or TuneDefaultParams())

    def workers(self, cluster: ClusterConfig, step_time_s: StepTimeFn) -> list[WorkerSpec]:
        """Slots for trials that all request ``gpus_per_trial`` GPUs: GPU nodes only; or, with 0 GPUs
        per trial or no GPU in the cluster, ``cpus_per_trial`` cores (0 = the node's worker_cpus or
        whole node): CPU nodes only."""
        gpus, cpus = self.params.gpus_per_trial, self.params.cpus_per_trial
        if gpus > 0 and cluster.has_kind(DeviceKind.GPU):
            return carve_workers(cluster, gpus=gpus, kinds=(DeviceKind.GPU,))

        def cores(node: str, g: NodeGroup) -> int:
            return cpus or g.worker_size

        return carve_workers(cluster, cores=cores, kinds=(DeviceKind.CPU,))

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        # Ray Tune only pauses a trial at a perturbation point: between them it keeps its slot.
        r = worker.resident
        if r is not None and r.status == TrialStatus.PAUSED and not view.at_perturbation_point(r.id):
            return Run(r.id, view.interval)
        # At a perturbation point Ray's PBT pauses the trial whenever another one is PAUSED or PENDING
        # (waiting for a slot, or its actor still starting); Tune then runs the least progressed
        # waiting trial, which may be the one it just paused: that trial restarts from its checkpoint
        # (reuse_actors is off) instead of continuing in memory.
        t = view.peek(Ordering.LEAST_PROGRESSED)
        if t is None:
            return IDLE
        first = view.least_progressed_starting()  # never r at its point (it is not on its way to a worker)
        alone = r is not None and t.id == r.id and view.peek(Ordering.LEAST_PROGRESSED, skip={r.id}) is None
        if r is not None and alone and first is None:
            return Run(r.id, view.interval)  # nothing waits: PBT continues it in memory
        # Tune stages a paused trial only when PBT picks it (choose_trial_to_run, the least
        # progressed PENDING or PAUSED trial): while that pick is still starting, no paused trial is
        # staged. Trials that never ran are staged in order regardless.
        if t.status == TrialStatus.PAUSED and first is not None and (first.iteration, first.id) <= (t.iteration, t.id):
            return IDLE
        return Run(t.id, view.interval, restart=r is not None and t.id == r.id)

    def idle_group(self, worker: WorkerView, view: SimView) -> Hashable:
        # Idle is answered when nothing is runnable, or when the least-progressed trial is paused behind
        # one still starting: neither depends on the worker. An idle worker's own trial, if it holds
        # one, is at its perturbation point (it would have continued it otherwise), so the first rule
        # of assign never singles one out.
        return 0
