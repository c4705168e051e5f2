"""A sweep's standings: per strategy, each metric's median and 95% interval over seeds, ranked by
the objective the experiment names (experiment.objective).

Runs that never reached the target count as infinitely slow; runs that evaluated nothing within
the budget count as accuracy minus infinity; both are written as null in JSON and "never" or "-"
in the table.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from hetune.sim.summary import ttt_sort_key

OBJECTIVES = {  # name -> (entry key of its median, True where larger is better)
    "time_to_target": ("ttt_median_s", False),
    "makespan": ("makespan_median_s", False),
    "cost": ("cost_median", False),
    "best_accuracy_at_budget": ("best_at_budget_median", True),
}


def _interval(values: Sequence[float]) -> tuple[float, float, float]:
    # "lower"/"higher" never interpolate, so runs that never reached the target (inf) stay inf.
    arr = np.asarray(values, dtype=float)
    return (float(np.median(arr)), float(np.percentile(arr, 2.5, method="lower")),
            float(np.percentile(arr, 97.5, method="higher")))


def _entry(name: str, seeds: dict[int, dict[str, Any]], budget: bool) -> dict[str, Any]:
    rows = list(seeds.values())
    entry: dict[str, Any] = {"strategy": name, "runs": len(rows),
                             "reached_target": sum(1 for r in rows if r["time_to_target_s"] is not None)}
    metrics = {"ttt": ([ttt_sort_key(r["time_to_target_s"]) for r in rows], "_s"),
               "makespan": ([float(r["makespan_s"]) for r in rows], "_s"),
               "cost": ([float(r["cost"]) for r in rows], "")}
    if budget:
        metrics["best_at_budget"] = ([-math.inf if r.get("best_accuracy_at_budget") is None
                                      else float(r["best_accuracy_at_budget"]) for r in rows], "")
    for key, (values, unit) in metrics.items():
        med, lo, hi = _interval(values)
        entry.update({f"{key}_median{unit}": med, f"{key}_lo{unit}": lo, f"{key}_hi{unit}": hi})
    if any(int(r.get("failures") or 0) for r in rows):  # the experiment's [faults] hit this strategy
        entry["failures_median"] = float(np.median([int(r.get("failures") or 0) for r in rows]))
        entry["trials_failed_median"] = float(np.median([int(r.get("trials_failed") or 0) for r in rows]))
    return entry


def ranking(rows: list[dict[str, Any]], baseline: str = "tune-default",
            objective: str = "time_to_target", budget: bool = False) -> list[dict[str, Any]]:
    """Per strategy: median and 95% interval of every metric, speedup over baseline, best first.

    The speedup is the baseline's median time to target over the strategy's; its interval
    comes from the per-seed ratios (the same seed gives every strategy the same initial
    population, so seeds pair up). Ties on the objective go to median time to target, then
    makespan, then name.

    Args:
        rows: sweep rows.
        baseline: strategy the speedups are relative to.
        objective: a key of OBJECTIVES.
        budget: the experiment has a budget (rows carry best_accuracy_at_budget).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r} (known: {', '.join(OBJECTIVES)})")
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["strategy"], {})[int(r["seed"])] = r
    out = []
    base = by.get(baseline, {})
    for name, seeds in by.items():
        entry = _entry(name, seeds, budget or objective == "best_accuracy_at_budget")
        if base:
            b_med = float(np.median([ttt_sort_key(r["time_to_target_s"]) for r in base.values()]))
            t_med = entry["ttt_median_s"]
            ratios = [ttt_sort_key(base[s]["time_to_target_s"]) / ttt_sort_key(r["time_to_target_s"])
                      for s, r in seeds.items() if s in base and math.isfinite(ttt_sort_key(r["time_to_target_s"]))
                      and math.isfinite(ttt_sort_key(base[s]["time_to_target_s"]))]
            entry["speedup"] = b_med / t_med if math.isfinite(t_med) and math.isfinite(b_med) else None
            if ratios:
                entry["speedup_lo"] = float(np.percentile(ratios, 2.5))
                entry["speedup_hi"] = float(np.percentile(ratios, 97.5))
        out.append(entry)
    key, larger = OBJECTIVES[objective]

    def order(e: dict[str, Any]) -> tuple:
        v = e[key]
        return (-v if larger else v, e["ttt_median_s"], e["makespan_median_s"], e["strategy"])

    out.sort(key=order)
    return out


def format_ranking(rank: list[dict[str, Any]], objective: str = "time_to_target") -> str:
    """The ranking as a plain-text table, headed by the objective it is ranked by."""
    def s(v: float) -> str:
        return "never" if not math.isfinite(v) else f"{v:,.0f}"

    def span(e: dict[str, Any], key: str, unit: str, fmt) -> str:
        return f"{fmt(e[f'{key}_median{unit}'])} ({fmt(e[f'{key}_lo{unit}'])}-{fmt(e[f'{key}_hi{unit}'])})"

    def acc(v: float) -> str:
        return "-" if not math.isfinite(v) else f"{v:.3f}"

    budget = any("best_at_budget_median" in e for e in rank)
    faults = any("failures_median" in e for e in rank)
    head = (f"{'strategy':<26}{'runs':>5}{'hit':>5}  {'time to target s (95%)':<28}{'makespan s (95%)':<26}"
            f"{'cost $ (95%)':<26}" + (f"{'best acc at budget (95%)':<28}" if budget else "")
            + (f"{'failures/lost trials':<22}" if faults else "") + f"{'speedup (95%)':<20}")
    head = head.rstrip()
    lines = [f"ranked by {objective.replace('_', ' ')}", head, "-" * len(head)]
    for e in rank:
        sp = e.get("speedup")
        sp_txt = "-" if sp is None else f"{sp:.2f}x"
        if "speedup_lo" in e:
            sp_txt += f" ({e['speedup_lo']:.2f}-{e['speedup_hi']:.2f})"
        line = (f"{e['strategy']:<26}{e['runs']:>5}{e['reached_target']:>5}  {span(e, 'ttt', '_s', s):<28}"
                f"{span(e, 'makespan', '_s', s):<26}{span(e, 'cost', '', lambda v: f'{v:,.2f}'):<26}")
        if budget:
            line += f"{span(e, 'best_at_budget', '', acc) if 'best_at_budget_median' in e else '-':<28}"
        if faults:
            lost = f"{e.get('failures_median', 0):g}/{e.get('trials_failed_median', 0):g}"
            line += f"{lost:<22}"
        lines.append((line + sp_txt).rstrip())
    return "\n".join(lines)
