"""Runnable trials indexed by the orderings strategies ask for.

Strategies ask for "the least-progressed runnable trial", "the best-ranked
one", and so on. Each ordering is a lazy heap, built on first use: a trial is
pushed when it becomes runnable and stale entries are skipped when peeked, so
each query is O(log n) even with 10,000 trials.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Protocol

from hetune.sim.enums import Ordering

__all__ = ["Ordering", "RunnableIndex", "ordering_keys"]  # Ordering lives in sim/enums.py; re-exported


class _Indexed(Protocol):
    id: int
    iteration: int
    accuracy: float | None
    version: int


def ordering_keys(mode: str) -> dict[Ordering, Callable[[_Indexed], tuple]]:
    """Sort key of each ordering (smallest first) for pbt.mode ``mode``; shared by both engines' views."""
    sign = 1.0 if mode == "max" else -1.0

    def goodness(t: _Indexed) -> float:
        # Trials that never reported rank below every real score, whatever the mode.
        return -math.inf if t.accuracy is None else sign * t.accuracy

    return {
        Ordering.LEAST_PROGRESSED: lambda t: (t.iteration, t.id),
        Ordering.MOST_PROGRESSED: lambda t: (-t.iteration, t.id),
        Ordering.BEST_RANKED: lambda t: (-goodness(t), t.id),
        Ordering.WORST_RANKED: lambda t: (goodness(t), t.id),
        Ordering.FIFO: lambda t: (t.id,),
    }


class RunnableIndex:
    """The set of runnable trials with lazily built ordered views.

    Args:
        mode: pbt.mode, "max" (a higher score is better) or "min"; it decides what best-ranked means.
    """

    def __init__(self, mode: str = "max") -> None:
        self._members: dict[int, _Indexed] = {}
        self._heaps: dict[Ordering, list[tuple]] = {}
        self._key = ordering_keys(mode)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, trial_id: int) -> bool:
        return trial_id in self._members

    def add(self, trial: _Indexed) -> None:
        """Mark a trial runnable (its version must have changed since it last left)."""
        self._members[trial.id] = trial
        for name, heap in self._heaps.items():
            heapq.heappush(heap, (self._key[name](trial), trial.version, trial.id))

    def discard(self, trial: _Indexed) -> None:
        """Mark a trial not runnable; the caller bumps its version."""
        self._members.pop(trial.id, None)

    def members(self) -> list[_Indexed]:
        """Runnable trials in trial id order."""
        return [self._members[k] for k in sorted(self._members)]

    def peek(self, ordering: Ordering, skip: set[int] | None = None) -> _Indexed | None:
        """First runnable trial in ``ordering`` (not removed), or None.

        Args:
            ordering: the order.
            skip: trial ids to pass over (left in the heap).
        """
        heap = self._heaps.get(ordering)
        if heap is None:
            key = self._key[Ordering(ordering)]
            heap = [(key(t), t.version, t.id) for t in self._members.values()]
            heapq.heapify(heap)
            self._heaps[ordering] = heap
        put_back = []
        found = None
        while heap:
            _, version, tid = heap[0]
            t = self._members.get(tid)
            if t is None or t.version != version:
                heapq.heappop(heap)  # stale: the trial ran or changed since
                continue
            if skip and tid in skip:
                put_back.append(heapq.heappop(heap))
                continue
            found = t
            break
        for entry in put_back:
            heapq.heappush(heap, entry)
        return found
