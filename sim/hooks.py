"""Hooks the engine calls when a trial changes worker: how extensions (adaptation, for one) reach the engine
without the engine knowing about them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence


@dataclass(frozen=True)
class MoveEffect:
    """What a hook does to a trial that moved.

    Args:
        step_factor: the trial's seconds per iteration are multiplied by this from now on (1 = unchanged).
        event: an event kind to log for the move ("" = none); the engine adds the trial's cumulative
            ``step_factor`` to its fields.
        fields: the event's other fields.
    """

    step_factor: float = 1.0
    event: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)


class MoveHook(Protocol):
    """Consulted each time a trial starts a chunk on a worker of another speed than its last one."""

    def on_move(self, trial: int, from_step_s: float, to_step_s: float, time_left_fraction: float) -> MoveEffect | None:
        """React to a move.

        Args:
            trial: trial id.
            from_step_s: seconds per iteration on the worker it last ran on.
            to_step_s: seconds per iteration on its new worker.
            time_left_fraction: the share of its iterations still to run, in [0, 1].
        """


def move_effects(hooks: Sequence[MoveHook], trial: int, from_step_s: float, to_step_s: float,
                 time_left_fraction: float) -> Iterator[MoveEffect]:
    """The effects of every hook on a trial that starts a chunk on a worker of another speed, in
    hook order, leaving out those that change nothing (arguments as ``MoveHook.on_move``)."""
    for hook in hooks:
        effect = hook.on_move(trial, from_step_s, to_step_s, time_left_fraction)
        if effect is not None and effect.step_factor != 1.0:
            yield effect
