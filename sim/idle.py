"""Idle workers in the order they went idle, grouped by the strategy's idle-group hint.

The engine offers work to idle workers in the order they became idle (the order of a dict that
workers are appended to when they free up, as it always was). A strategy may promise, through
``Strategy.idle_group``, that idle workers of one group all get ``Idle`` once one of them does,
as long as nothing changes (sim/strategies/base.py). The engine then skips the rest of that group
until the next decision that changes the run; finding the next worker to ask costs
O(groups x log workers) instead of a walk over every idle worker, so a 4,096-GPU cluster whose
strategy waits for one trial to start costs a few questions per chunk, not 4,096.

Each group is a ``SortedDict`` (sortedcontainers: ordered by the sequence number a worker got when
it went idle, O(log n) insert, delete and seek), so a pass can resume a group after any position.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Iterator

from sortedcontainers import SortedDict

from hetune.sim.state import SimulationError, Worker
from hetune.sim.strategies.base import Idle, SimView, Strategy

GroupOf = Callable[[Worker], Hashable]


class IdleWorkers:
    """The idle workers of a run.

    Args:
        group_of: the strategy's idle group of a worker, asked when the worker goes idle (it keeps
            that group while idle); None where the strategy promises nothing (every idle worker asked).
    """

    def __init__(self, group_of: GroupOf | None = None) -> None:
        self._group_of = group_of
        self._next = 0
        self._order: dict[int, Worker] = {}  # worker id -> worker, in the order they went idle
        self._where: dict[int, tuple[int, Hashable]] = {}  # worker id -> (sequence number, group)
        self._groups: dict[Hashable, SortedDict] = {}  # group -> {sequence number: worker}

    @property
    def grouped(self) -> bool:
        """Whether the strategy declared idle groups."""
        return self._group_of is not None

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, worker_id: int) -> bool:
        return worker_id in self._order

    def add(self, w: Worker) -> None:
        """``w`` went idle (last in the order)."""
        if w.id in self._order:
            return
        self._order[w.id] = w
        if self._group_of is None:
            return
        self._next += 1
        group = self._group_of(w)
        self._where[w.id] = (self._next, group)
        members = self._groups.get(group)
        if members is None:
            members = self._groups[group] = SortedDict()
        members[self._next] = w

    def remove(self, w: Worker) -> None:
        """``w`` is no longer idle (it took work, retired or went down); nothing if it was not idle."""
        if self._order.pop(w.id, None) is None or self._group_of is None:
            return
        seq, group = self._where.pop(w.id)
        del self._groups[group][seq]  # an emptied group is kept: groups are few, and come back

    def in_order(self) -> list[Worker]:
        """The idle workers, in the order they went idle (a copy)."""
        return list(self._order.values())

    def position(self, w: Worker) -> int:
        """``w``'s sequence number (grouped only)."""
        return self._where[w.id][0]

    def group(self, w: Worker) -> Hashable:
        """``w``'s idle group (grouped only)."""
        return self._where[w.id][1]

    def last_position(self) -> int:
        """The sequence number of the worker that went idle last (grouped only)."""
        return self._next

    def next_after(self, after: int, upto: int, blocked: set[Hashable]) -> Worker | None:
        """The idle worker that went idle first after position ``after`` (and at or before ``upto``),
        in a group not in ``blocked``; None if none (grouped only)."""
        best: tuple[int, Worker] | None = None
        for group, members in self._groups.items():
            if group in blocked:
                continue
            i = members.bisect_right(after)
            if i < len(members):
                seq, w = members.peekitem(i)
                if seq <= upto and (best is None or seq < best[0]):
                    best = (seq, w)
        return None if best is None else best[1]

    def members_after(self, group: Hashable, after: int, upto: int) -> Iterator[Worker]:
        """Idle workers of ``group`` that went idle after position ``after``, up to ``upto``."""
        members = self._groups.get(group)
        if members is None:
            return iter(())
        return (members[s] for s in members.irange(after, upto, inclusive=(False, True)))


class DispatchPass:
    """One pass of the engine's offer of work over the idle workers it holds when the pass starts.

    Iterating gives the workers to ask, in the order they went idle; the engine reports each
    ``Idle`` answer (``block``: the worker's group is skipped from then on) and each answer that
    changes the run (``changed``: every group may be asked again, from the next position on, as a
    walk over every idle worker would). With ``use_groups`` False, or where the strategy declared no
    groups, every idle worker is asked, as it always was.

    Args:
        idle: the run's idle workers.
        use_groups: whether to skip by the strategy's groups.
    """

    def __init__(self, idle: IdleWorkers, use_groups: bool = True) -> None:
        self._idle = idle
        self._grouped = use_groups and idle.grouped
        self._last = 0
        self._upto = idle.last_position() if idle.grouped else 0
        self._blocked: set[Hashable] = set()

    def __iter__(self) -> Iterator[Worker]:
        if not self._grouped:
            yield from self._idle.in_order()
            return
        while True:
            w = self._idle.next_after(self._last, self._upto, self._blocked)
            if w is None:
                return
            self._last = self._idle.position(w)
            yield w

    def block(self, w: Worker) -> None:
        """``w`` was answered Idle: skip its group until ``changed``."""
        if self._grouped:
            self._blocked.add(self._idle.group(w))

    def skipped(self, w: Worker) -> Iterator[Worker]:
        """The workers that ``block(w)`` skips for now (its group's members after it): a check asks them."""
        if not self._grouped:
            return iter(())
        return self._idle.members_after(self._idle.group(w), self._last, self._upto)

    def changed(self) -> None:
        """The last answer changed the run: no group's Idle answer holds any more."""
        self._blocked.clear()


def verify_idle(strategy: Strategy, view: SimView, asked: Worker, skipped: Iterable[Worker], now: float) -> None:
    """Ask every worker the strategy's idle group skips (a test of the hint); SimulationError naming
    the first whose answer is not the Idle that ``asked``, of the same group, got."""
    for other in skipped:
        answer = strategy.assign(other, view)
        if not isinstance(answer, Idle):
            raise SimulationError(
                f"strategy {strategy.name!r}: idle_group promised worker {other.id} the Idle answer worker "
                f"{asked.id} got (same group), but it answered {answer} at t={now:.1f}s")
