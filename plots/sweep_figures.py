"""Figures of a sweep folder (sweep.csv): strategy comparison, speedup, device-hours and cost."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from hetune.plots.style import figure, save, styles
from hetune.sim.summary import ttt_sort_key
from hetune.sim.standings import ranking


def _by_strategy(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["strategy"], []).append(r)
    order = [e["strategy"] for e in ranking(rows)]
    return {s: by[s] for s in order}


def strategy_comparison(rows: list[dict[str, Any]], out: Path, label: str, pdf: bool = False) -> list[Path]:
    """Box plots over seeds of time to target and makespan per strategy, median marked.

    Runs that never reached the target are drawn at the top edge, counted in the label.
    """
    by = _by_strategy(rows)
    fig, axes = figure(8.0, 3.8, ncols=2)
    for ax, key, title in ((axes[0], "time_to_target_s", "Time to target"), (axes[1], "makespan_s", "Makespan")):
        data, names = [], []
        for s, rs in by.items():
            vals = [ttt_sort_key(r[key]) for r in rs]
            finite = [v for v in vals if math.isfinite(v)]
            missed = len(vals) - len(finite)
            data.append(finite or [np.nan])
            names.append(s + (f"\n({missed} missed)" if missed else ""))
        bp = ax.boxplot(data, orientation="horizontal", patch_artist=True,
                        medianprops={"color": "black", "linewidth": 2})
        for patch, (gray, hatch, _, _) in zip(bp["boxes"], styles()):
            patch.set_facecolor(gray)
            patch.set_hatch(hatch)
            patch.set_alpha(0.8)
        for i, d in enumerate(data, 1):
            med = float(np.nanmedian(d)) if not all(np.isnan(d)) else float("nan")
            if math.isfinite(med):
                ax.annotate(f"median {med:,.0f}", (med, i - 0.32), ha="center", fontsize=7)
        ax.set_yticks(range(1, len(names) + 1), names)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (simulated wall clock)")
        ax.set_title(f"{title} per strategy ({len(next(iter(by.values())))} seeds)")
    fig.suptitle(f"Strategy comparison: {label}")
    return save(fig, out, f"{label}-strategy-comparison", pdf)


def speedup(rows: list[dict[str, Any]], out: Path, label: str, pdf: bool = False) -> list[Path]:
    """Speedup in median time to target over tune-default, with the 95% interval of per-seed ratios."""
    rank = [e for e in ranking(rows) if e.get("speedup") is not None]
    fig, ax = figure(6.4, 3.2)
    names = [e["strategy"] for e in rank]
    vals = [e["speedup"] for e in rank]
    # The ratio of medians need not lie inside the per-seed ratios' interval with few seeds.
    lo = [max(0.0, e["speedup"] - e.get("speedup_lo", e["speedup"])) for e in rank]
    hi = [max(0.0, e.get("speedup_hi", e["speedup"]) - e["speedup"]) for e in rank]
    bars = ax.barh(names, vals, xerr=[lo, hi], color="0.6", edgecolor="black", capsize=3)
    for b, (_, hatch, _, _) in zip(bars, styles()):
        b.set_hatch(hatch)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over tune-default (x, median time to target; bars: 95% of per-seed ratios)")
    ax.set_title(f"Speedup over Ray Tune's default: {label}")
    return save(fig, out, f"{label}-speedup", pdf)


def cost(rows: list[dict[str, Any]], out: Path, label: str, pdf: bool = False) -> list[Path]:
    """Median device-hours per device type (stacked) and median cost per strategy."""
    by = _by_strategy(rows)
    devices = sorted({k[len("device_hours_"):] for r in rows for k in r if k.startswith("device_hours_")})
    fig, axes = figure(8.0, 3.4, ncols=2)
    names = list(by)
    left = np.zeros(len(names))
    for dev, (gray, hatch, _, _) in zip(devices, styles()):
        vals = np.array([np.median([float(r.get(f"device_hours_{dev}") or 0.0) for r in by[s]]) for s in names])
        axes[0].barh(names, vals, left=left, color=gray, hatch=hatch, edgecolor="black", label=dev)
        left += vals
    axes[0].invert_yaxis()
    axes[0].set_xlabel("device-hours (median over seeds)")
    axes[0].set_title("Device-hours per device type")
    axes[0].legend(fontsize=7)
    costs = [np.median([float(r["cost"]) for r in by[s]]) for s in names]
    axes[1].barh(names, costs, color="0.5", edgecolor="black")
    axes[1].invert_yaxis()
    axes[1].set_xlabel("cost, dollars (median over seeds)")
    axes[1].set_title("Cost per strategy")
    fig.suptitle(f"Resources used: {label}")
    return save(fig, out, f"{label}-cost", pdf)


SWEEP_FIGURES = (strategy_comparison, speedup, cost)
