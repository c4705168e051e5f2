"""The metric set, computed from an event log (simulated or real, the same code).

Metrics (names are also sweep.csv's columns):
    time_to_target_s     first time any trial reported accuracy >= target (null if none did)
    best_accuracy_at_budget  best accuracy evaluated within the experiment's wall-clock and cost
                         budget (budget mode only; null without a budget or if nothing was evaluated)
    makespan_s           time the last trial stopped
    best_accuracy        best accuracy any trial reported
    device_hours_<type>  devices x hours each worker existed, per device type
    utilization_<type>   busy device-seconds / existing device-seconds, per device type
    cost                 sum of device-hours x price per device-hour
    exploits             number of exploit events
    failures             trial failures (a node lost under a running trial; sim/faults.py)
    trials_failed        trials stopped for good after more than max_failures failures
    lost_iterations      iterations of work lost to failures (redone from a checkpoint)
    checkpoint_overhead_s  device-seconds spent saving, loading and copying checkpoints
    migration_overhead_s   device-seconds spent copying checkpoints between nodes
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Mapping

from hetune.sim.anytime import anytime_curve, best_at_budget
from hetune.sim.events import BUSY_KINDS


def summarize(events: Iterable[Mapping[str, Any]], target_accuracy: float,
              prices: Mapping[str, float], budget_s: float = 0.0, budget_cost: float = 0.0) -> dict[str, Any]:
    """Compute the metric set from events.

    Args:
        events: the event log, in time order.
        target_accuracy: accuracy that counts as reaching the target.
        prices: device type -> dollars per device-hour.
        budget_s: wall-clock budget, seconds (0: none).
        budget_cost: cost budget, dollars (0: none).
    """
    events = list(events)
    out, alive, busy = _tally(events, target_accuracy)
    cost = 0.0
    for dev in sorted(alive):
        hours = alive[dev] / 3600.0
        out[f"device_hours_{dev}"] = round(hours, 6)
        out[f"utilization_{dev}"] = round(busy[dev] / alive[dev], 6) if alive[dev] > 0 else 0.0
        cost += hours * prices.get(dev, 0.0)
    out["cost"] = round(cost, 6)
    out["best_accuracy_at_budget"] = (best_at_budget(anytime_curve(events, prices), budget_s, budget_cost)
                                      if budget_s or budget_cost else None)
    return out


def _tally(events: list[Mapping[str, Any]], target_accuracy: float
           ) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """One pass over the events: the run-wide metrics, and per device type its alive and busy
    device-seconds (a worker never removed counts to the end of the run)."""
    ttt: float | None = None
    best = 0.0
    makespan = 0.0
    exploits = 0
    failures = trials_failed = lost = 0
    ckpt_s = 0.0
    migration_s = 0.0
    added: dict[int, tuple[float, str, int]] = {}
    alive: dict[str, float] = defaultdict(float)  # device-seconds
    busy: dict[str, float] = defaultdict(float)  # device-seconds
    devices_of: dict[int, int] = {}
    for ev in events:
        kind = ev["kind"]
        t = float(ev["t"])
        makespan = max(makespan, t) if kind != "worker_removed" else makespan
        acc = ev.get("accuracy")
        if kind == "chunk" and acc is not None:
            best = max(best, acc)
            if ttt is None and acc >= target_accuracy:
                ttt = t
        if kind == "worker_added":
            added[ev["worker"]] = (t, ev["device"], ev["devices"])
            devices_of[ev["worker"]] = ev["devices"]
        elif kind == "worker_removed" and ev["worker"] in added:
            t0, dev, n = added.pop(ev["worker"])
            alive[dev] += (t - t0) * n
        elif kind in BUSY_KINDS and ev.get("worker") is not None:
            d = float(ev.get("duration_s") or 0.0)
            busy[ev["device"]] += d * devices_of.get(ev["worker"], 1)
            if kind in ("checkpoint", "resume", "exploit"):
                ckpt_s += d if kind == "checkpoint" else float(ev.get("load_s") or 0) + float(ev.get("copy_s") or 0)
                migration_s += float(ev.get("copy_s") or 0.0)
        if kind == "exploit":
            exploits += 1
        elif kind == "failure":
            failures += 1
            lost += int(ev.get("lost_iterations") or 0)
        elif kind == "stop" and ev.get("reason") == "failed":
            trials_failed += 1
    for _, (t0, dev, n) in added.items():  # workers never removed: count to the end
        alive[dev] += (makespan - t0) * n
    return {
        "time_to_target_s": None if ttt is None else round(ttt, 6),
        "makespan_s": round(makespan, 6),
        "best_accuracy": round(best, 6),
        "exploits": exploits,
        "failures": failures,
        "trials_failed": trials_failed,
        "lost_iterations": lost,
        "checkpoint_overhead_s": round(ckpt_s, 6),
        "migration_overhead_s": round(migration_s, 6),
    }, alive, busy


def ttt_sort_key(value: float | None) -> float:
    """Sort key that ranks 'never reached the target' worse than any time."""
    return math.inf if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
