"""Incremental ranking of trials by last score, for PBT quantiles at scale.

Keeps a sorted list of (sign * score, trial id) so membership of the bottom or
top quantile is a binary search, not a sort of the whole population per
perturbation (10,000 trials x 20 perturbation points would be 200,000 sorts).
Ordering and ties match ``sim.pbt.quantiles``.
"""

from __future__ import annotations

import bisect

from hetune.sim.config import quantile_count


class Ranking:
    """Unfinished trials that reported a score, worst first.

    Args:
        mode: "max" (higher score is better) or "min".
    """

    def __init__(self, mode: str = "max") -> None:
        self._sign = 1.0 if mode == "max" else -1.0
        self._keys: list[tuple[float, int]] = []
        self._key_of: dict[int, tuple[float, int]] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def update(self, trial: int, score: float) -> None:
        """Set a trial's last score."""
        self.remove(trial)
        key = (self._sign * score, trial)
        bisect.insort(self._keys, key)
        self._key_of[trial] = key

    def remove(self, trial: int) -> None:
        """Drop a trial (finished, or no score)."""
        key = self._key_of.pop(trial, None)
        if key is not None:
            i = bisect.bisect_left(self._keys, key)
            del self._keys[i]

    def position(self, trial: int) -> int:
        """0-based rank from the worst; -1 when the trial is not ranked."""
        key = self._key_of.get(trial)
        return -1 if key is None else bisect.bisect_left(self._keys, key)

    def quantile_size(self, fraction: float) -> int:
        """Trials in each quantile (Ray Tune's rule)."""
        return quantile_count(len(self._keys), fraction)

    def in_bottom(self, trial: int, fraction: float) -> bool:
        """Whether ``trial`` is in the bottom quantile."""
        k = self.quantile_size(fraction)
        pos = self.position(trial)
        return k > 0 and 0 <= pos < k

    def in_top(self, trial: int, fraction: float) -> bool:
        """Whether ``trial`` is in the top quantile."""
        k = self.quantile_size(fraction)
        pos = self.position(trial)
        return k > 0 and pos >= len(self._keys) - k

    def top(self, fraction: float) -> list[int]:
        """Trial ids of the top quantile, worst of them first."""
        k = self.quantile_size(fraction)
        return [t for _, t in self._keys[len(self._keys) - k:]] if k else []

    def top_excluding(self, fraction: float, trial: int) -> tuple[int, int, int]:
        """(how many top-quantile trials other than ``trial``, where the quantile starts, ``trial``'s position
        in it or -1), so that ``top_member`` can pick one without building the list (O(log n))."""
        k = self.quantile_size(fraction)
        start = len(self._keys) - k if k else len(self._keys)
        pos = self.position(trial)
        inside = pos if pos >= start else -1
        return (k - (1 if inside >= 0 else 0)), start, inside

    def top_member(self, start: int, inside: int, i: int) -> int:
        """The ``i``-th (worst first) top-quantile trial, ``inside`` (a position, or -1) passed over."""
        j = start + i
        if 0 <= inside <= j:
            j += 1
        return self._keys[j][1]

    def best(self, n: int) -> list[int]:
        """The ``n`` best trial ids, best first."""
        return [t for _, t in reversed(self._keys[max(0, len(self._keys) - n):])]
