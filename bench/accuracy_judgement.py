"""How well a simulated distribution of best accuracy holds real runs (issue "Accuracy predictions checked
against real PBT runs", item 2): each real run's percentile in its simulated distribution, the share of
runs inside the simulated 95% range, the range's width against the real runs' spread, a proper score
(CRPS), and the paired difference between two arms, real against simulated.

Inputs are ``hetune compare`` records (``fidelity.json``): ``best_accuracy_at_budget.real`` and
``sim_spread.best_accuracy`` (``values`` over simulated seeds 0..N-1, ``lo``/``hi`` its 2.5-97.5% range).
Accuracies are fractions; CRPS is in accuracy units (lower is better).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import numpy as np

from fidelity_digits import percentile  # bench/ is on the path: the script's own folder


def crps(real: float, values: Sequence[float]) -> float:
    """The continuous ranked probability score of the empirical distribution ``values`` at ``real``:
    E|X - y| - E|X - X'| / 2 (Gneiting and Raftery 2007), accuracy units."""
    v = np.sort(np.asarray(values, float))
    n = len(v)
    # E|X - X'| over ordered pairs from the sorted sample: 2 sum_i (2i - n + 1) v_i / n^2
    spread = 2.0 * float(np.sum((2 * np.arange(n) - n + 1) * v)) / (n * n)
    return float(np.mean(np.abs(v - real))) - spread / 2.0


def record(f: dict[str, Any]) -> dict[str, Any]:
    """One run's judgement from its compare record: best accuracy at the budget where the run had one, else
    over the whole run (the key compare's spread names)."""
    sim = f["sim_spread"]["best_accuracy"]
    real = f[sim.get("key", "best_accuracy_at_budget")]["real"]
    values = [x for x in sim["values"] if x is not None]
    return {"real": real, "sim_median": sim["median"], "lo": sim["lo"], "hi": sim["hi"],
            "percentile": round(percentile(real, values) or 0.0, 3), "inside": bool(sim["lo"] <= real <= sim["hi"]),
            "crps": round(crps(real, values), 4), "width": round(sim["hi"] - sim["lo"], 4), "values": values}


def summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pooled over ``records``: share inside, mean percentile, mean CRPS, mean simulated width, and the
    real runs' own 95% spread (1.96 sd either side; n/a under 2 runs)."""
    reals = [r["real"] for r in records]
    sd = statistics.stdev(reals) if len(reals) > 1 else math.nan
    return {"runs": len(records), "inside": round(sum(r["inside"] for r in records) / len(records), 3),
            "mean_percentile": round(statistics.fmean(r["percentile"] for r in records), 3),
            "crps": round(statistics.fmean(r["crps"] for r in records), 4),
            "sim_width": round(statistics.fmean(r["width"] for r in records), 4),
            "real_spread": round(2 * 1.96 * sd, 4) if math.isfinite(sd) else None,
            "real_median": round(statistics.median(reals), 4)}


def paired_gap(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Arm ``a`` minus arm ``b`` (each {seed: record}): the real mean paired difference over the seeds both
    ran, its standard error and how many errors it is from 0 (resolved at 2 or more); the simulated mean
    difference over the simulated seeds (seed k of one arm against seed k of the other: same initial
    configurations and, with draws, the same learning-model draw) and its standard error."""
    seeds = sorted(set(a) & set(b))
    diffs = [a[s]["real"] - b[s]["real"] for s in seeds]
    mean = statistics.fmean(diffs) if diffs else math.nan
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    sa, sb = a[seeds[0]]["values"], b[seeds[0]]["values"]
    sim = [x - y for x, y in zip(sa, sb)]
    return {"seeds": seeds, "real_mean": round(mean, 4), "real_se": round(se, 4) if math.isfinite(se) else None,
            "real_z": round(mean / se, 2) if math.isfinite(se) and se > 0 else None,
            "resolved": bool(math.isfinite(se) and se > 0 and abs(mean) >= 2 * se),
            "sim_mean": round(statistics.fmean(sim), 4),
            "sim_se": round(statistics.stdev(sim) / math.sqrt(len(sim)), 4)}


def gap_verdict(g: dict[str, Any]) -> str:
    """The issue's gap target: the simulated gap has the real one's sign and at least half its size, judged
    only where the real paired gap is resolved."""
    if not g["resolved"]:
        return "not judged (real gap not resolved)"
    ok = math.copysign(1, g["sim_mean"]) == math.copysign(1, g["real_mean"]) and \
        abs(g["sim_mean"]) >= abs(g["real_mean"]) / 2
    return "met" if ok else "missed"
