"""Which worker slots of a StrategyScheduler still have a live Ray node under them.

A slot is the custom resource ``hetune-worker:<i>`` that one node declares. When that node dies
(a crash, a spot preemption, ``Cluster.remove_node``), Ray drops its resources: a trial pinned to
the slot would wait for them forever, so the scheduler marks the slot down, frees its trial for
the strategy to place elsewhere, and takes the slot back when a node declaring it joins again.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from hetune.real.strategy_view import Slot, slot_resource

REFRESH_S = 1.0  # how often down slots are checked for a node that declares them again, seconds


def ray_slot_resources() -> set[str] | None:
    """Resource names that some live Ray node declares (``ray.nodes()``); None if Ray is not up here."""
    import ray

    if not ray.is_initialized():
        return None
    return {name for n in ray.nodes() if n.get("Alive") for name in (n.get("Resources") or {})}


class SlotLiveness:
    """Tracks slots whose node is gone.

    Args:
        on_change: called with (slot, "worker_removed" | "worker_added") when a slot goes down or
            comes back (the event recorder's hook).
        live_resources: returns the resource names live nodes declare, or None when unknown
            (default: from ``ray.nodes()``).
    """

    def __init__(self, on_change: Callable[[Slot, str], None] | None = None,
                 live_resources: Callable[[], set[str] | None] = ray_slot_resources) -> None:
        self.on_change = on_change
        self.live_resources = live_resources
        self._checked = 0.0

    def refresh(self, slots: Iterable[Slot], force: bool = False, poll: bool = False) -> list[Slot]:
        """Mark slots down or back up; returns the slots that went down now.

        Args:
            slots: the scheduler's slots.
            force: check now.
            poll: check if REFRESH_S passed since the last check (without it, only while some
                slot is down: to see it come back).
        """
        slots = list(slots)
        now = time.monotonic()
        if not force and ((not poll and not any(s.down for s in slots)) or now - self._checked < REFRESH_S):
            return []
        self._checked = now
        live = self.live_resources()
        if live is None:  # nothing known about the nodes: every slot stays as it is
            return []
        lost = []
        for s in slots:
            alive = slot_resource(s.id) in live
            if s.down == (not alive) or s.retired:
                continue
            s.down = not alive
            if s.down:
                lost.append(s)
            if self.on_change is not None:
                self.on_change(s, "worker_removed" if s.down else "worker_added")
        return lost


def drop_pending_actor(tune_controller: object, trial: object) -> None:
    """Forget the actor Tune requested for ``trial`` on a slot whose node died before it started.

    Tune keeps such a request; when a node declares the slot again it would start the trial there,
    RUNNING outside the strategy's placement (and Tune would then try to train a trial the strategy
    paused). The request is removed as Tune removes one it replaces with a cached actor
    (``TuneController._maybe_reuse_cached_actor``); Tune's scheduler wrapper hides the controller's
    private parts, so they are reached through it.
    """
    ctl = getattr(tune_controller, "_tune_controller", tune_controller)
    actor = getattr(ctl, "_trial_to_actor", {}).pop(trial, None)
    if actor is not None:
        ctl._actor_to_trial.pop(actor, None)  # type: ignore[attr-defined]
        ctl._remove_actor(tracked_actor=actor)  # type: ignore[attr-defined]
    if trial in getattr(ctl, "_staged_trials", ()):
        ctl._unstage_trial_with_resources(trial)  # type: ignore[attr-defined]
