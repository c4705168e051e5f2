"""The anytime curve of a run: best evaluated accuracy so far against wall-clock seconds and cost.

A PBT user with a budget asks "how good is the best model I have after this many seconds or
dollars?". The curve answers it for any budget; ``best_at_budget`` reads one point off it. Both
engines' event logs give it (only chunk events carry evaluated accuracies).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np


def anytime_curve(events: Iterable[Mapping[str, Any]], prices: Mapping[str, float]) -> list[list[float]]:
    """Points [t_s, best_accuracy, cost_dollars] at every improvement of the best accuracy.

    Cost at time t counts every worker's devices x its price per device-hour for the time it
    existed up to t (a worker never removed exists to the end of the log).

    Args:
        events: the event log, in time order.
        prices: device type -> dollars per device-hour.
    """
    improvements: list[tuple[float, float]] = []
    best = -np.inf
    spans: list[list[float]] = []  # [start s, end s, dollars per second]: a worker whose node failed has several
    open_span: dict[int, int] = {}  # worker -> index of its span still open
    for ev in events:
        kind = ev["kind"]
        if kind == "chunk" and ev.get("accuracy") is not None and ev["accuracy"] > best:
            best = float(ev["accuracy"])
            improvements.append((float(ev["t"]), best))
        elif kind == "worker_added":
            rate = prices.get(ev["device"], 0.0) * ev["devices"] / 3600.0
            open_span[ev["worker"]] = len(spans)
            spans.append([float(ev["t"]), np.inf, rate])
        elif kind == "worker_removed" and ev["worker"] in open_span:
            spans[open_span.pop(ev["worker"])][1] = float(ev["t"])
    if not improvements:
        return []
    arr = np.array(spans, dtype=float).reshape(-1, 3)
    times = np.array([t for t, _ in improvements])
    # cost(t) = sum over workers of rate x (min(t, end) - start)+, for every improvement time at once
    alive = np.clip(np.minimum(times[:, None], arr[None, :, 1]) - arr[None, :, 0], 0.0, None)
    costs = alive @ arr[:, 2]
    return [[round(t, 6), round(a, 6), round(float(c), 6)] for (t, a), c in zip(improvements, costs)]


def best_at_budget(curve: list[list[float]], budget_s: float = 0.0, budget_cost: float = 0.0) -> float | None:
    """Best accuracy evaluated within the budget (0 = that budget unset); None if nothing was evaluated
    within it.

    Args:
        curve: an ``anytime_curve``.
        budget_s: wall-clock budget, seconds.
        budget_cost: cost budget, dollars.
    """
    best = None
    for t, acc, cost in curve:  # best only grows along the curve, so the last point inside wins
        if (budget_s and t > budget_s) or (budget_cost and cost > budget_cost):
            break
        best = acc
    return best
