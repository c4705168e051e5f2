"""Figures of one run folder (events.jsonl), simulated or real alike: timeline, population, utilization."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib import ticker
import numpy as np

from hetune.plots.style import LINESTYLES, figure, save
from hetune.sim.events import BUSY_KINDS


class _PlainLog(ticker.LogFormatter):
    """Matplotlib's choice of which log ticks to label, written as plain numbers (0.04, not 4e-02)."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def _workers(events: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(worker, device, node) sorted by device type then worker id."""
    seen = {e["worker"]: (e["worker"], e["device"], e["node"]) for e in events if e["kind"] == "worker_added"}
    return sorted(seen.values(), key=lambda w: (w[1], w[0]))


def timeline(events: list[dict[str, Any]], out: Path, label: str, pdf: bool = False) -> list[Path]:
    """Gantt chart: one row per worker grouped by device type, bars coloured by trial, exploits marked."""
    workers = _workers(events)
    row = {w: i for i, (w, _, _) in enumerate(workers)}
    trials = sorted({e["trial"] for e in events if e["trial"] is not None})
    cmap = plt.get_cmap("tab20", max(len(trials), 1))
    color = {t: cmap(i % 20) for i, t in enumerate(trials)}
    fig, ax = figure(8.0, max(2.5, 0.22 * len(workers) + 1.2))
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    colors: dict[int, list[Any]] = defaultdict(list)
    over: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["kind"] in BUSY_KINDS and e["worker"] in row and e.get("duration_s"):
            span = (e["t"] - e["duration_s"], e["duration_s"])
            if e["kind"] == "chunk":
                spans[e["worker"]].append(span)
                colors[e["worker"]].append(color[e["trial"]])
            else:
                over[e["worker"]].append(span)
    for w, i in row.items():
        ax.broken_barh(spans[w], (i - 0.4, 0.8), facecolors=colors[w], edgecolor="black", linewidth=0.2)
        ax.broken_barh(over[w], (i - 0.4, 0.8), facecolors="white", edgecolor="0.3", hatch="////", linewidth=0.2)
    ex = [e for e in events if e["kind"] == "exploit" and e["worker"] in row]
    if ex:
        ax.scatter([e["t"] for e in ex], [row[e["worker"]] for e in ex], marker="x", color="black", s=18,
                   zorder=3, label="exploit")
    ends = [e["t"] for e in events if e["kind"] == "worker_removed"]
    for e in events:
        if e["kind"] == "worker_removed" and e["worker"] in row:
            ax.plot([e["t"]], [row[e["worker"]]], marker="|", color="black", markersize=8)
    # a node named after its device type ("k80") is not said twice
    ax.set_yticks(range(len(workers)), [f"{n} #{w}" if d in n else f"{d} {n} #{w}" for w, d, n in workers],
                  fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("time since start (s); bars: trials by colour, hatched: start/restore/checkpoint, x: exploit, "
                  "|: released")
    ax.set_title(f"Timeline: {label}")
    if ex:
        ax.legend(loc="lower right", fontsize=7)
    ax.set_xlim(0, max(ends or [1.0]))
    return save(fig, out, f"{label}-timeline", pdf)


def config_at(events: list[dict[str, Any]], trial: int, t: float) -> dict[str, float]:
    """The trial's configuration in force at time ``t`` (from trial_start and explore events)."""
    cfg: dict[str, float] = {}
    for e in events:
        if e["t"] > t:
            break
        if e["trial"] == trial and e["kind"] == "trial_start":
            cfg = dict(e["config"])
        elif e["trial"] == trial and e["kind"] == "explore":
            cfg = dict(e["new_config"])
    return cfg


def lineage(events: list[dict[str, Any]], trial: int) -> list[tuple[int, float, float]]:
    """(trial, from time, to time) segments of a trial's ancestry, oldest first.

    Walking back from the end: before each exploit, the trial's state came from its donor.
    """
    segments = []
    end = max(e["t"] for e in events)
    current = trial
    while True:
        ex = [e for e in events if e["kind"] == "exploit" and e["trial"] == current and e["t"] <= end]
        if not ex:
            segments.append((current, 0.0, end))
            break
        last = ex[-1]
        segments.append((current, last["t"], end))
        current, end = last["donor"], last["t"]
    return segments[::-1]


def population(events: list[dict[str, Any]], out: Path, label: str, pdf: bool = False) -> list[Path]:
    """Accuracy against iteration for every trial (exploit jumps visible) and the best trial's lineage."""
    chunks = [e for e in events if e["kind"] == "chunk" and e["accuracy"] is not None]
    fig, axes = figure(8.0, 5.6, nrows=2, ncols=2, height_ratios=[2, 1])
    ax = axes[0][0]
    gs = axes[0][0].get_gridspec()
    for a in axes[0]:
        a.remove()
    ax = fig.add_subplot(gs[0, :])
    by: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for e in chunks:
        by[e["trial"]].append((e["iteration"], e["accuracy"]))
    best = max(chunks, key=lambda e: (e["accuracy"], -e["t"]))["trial"] if chunks else None
    for i, (t, pts) in enumerate(sorted(by.items())):
        xs, ys = zip(*pts)
        ax.plot(xs, ys, color="black" if t == best else "0.6", linewidth=2 if t == best else 0.8,
                linestyle=LINESTYLES[i % len(LINESTYLES)] if t != best else "-", zorder=3 if t == best else 1)
    # exploits as a rug of ticks on the bottom edge: vertical lines across the plot read as the grid
    ex = [e["iteration"] for e in events if e["kind"] == "exploit"]
    ax.plot(ex, [0.0] * len(ex), linestyle="none", marker="|", markersize=9, color="black",
            transform=ax.get_xaxis_transform(), clip_on=False)
    ax.set_xlabel("trial iteration (mini-batches)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"Population: {label}\n{len(by)} trials; black: best trial {best}; "
                 f"ticks on the bottom edge: the {len(ex)} exploits")
    if best is not None:
        segs = lineage(events, best)
        times = sorted({e["t"] for e in events if e["kind"] in ("chunk", "explore", "trial_start")})
        for k, (ax2, key) in enumerate(((axes[1][0], "lr"), (axes[1][1], "momentum"))):
            hx: list[float] = []
            hy: list[float] = []
            for trial, t0, t1 in segs:
                for t in times:
                    if t0 <= t <= t1:
                        v = config_at(events, trial, t).get(key)
                        if v is not None:
                            hx.append(t)
                            hy.append(v)
            ax2.step(hx, hy, where="post", color="black")
            ax2.set_xlabel("time since start (s)")
            ax2.set_ylabel(key)
            if key == "lr" and hy and min(hy) > 0 and max(hy) / min(hy) >= 10:
                # log only across a decade or more, with plain numbers: within one, matplotlib labels
                # the minor ticks as 2.95x10^-1
                ax2.set_yscale("log")
                ax2.yaxis.set_major_formatter(_PlainLog())
                ax2.yaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
            ax2.set_title(f"{key}, best trial's lineage ({len(segs)} segment{'s' if len(segs) > 1 else ''})")
    return save(fig, out, f"{label}-population", pdf)


def utilization(events: list[dict[str, Any]], out: Path, label: str, pdf: bool = False, bins: int = 60) -> list[Path]:
    """Busy fraction of each device type's devices over time (time bins)."""
    end = max(e["t"] for e in events) or 1.0
    edges = np.linspace(0.0, end, bins + 1)
    width = edges[1] - edges[0]
    devices_of = {e["worker"]: e["devices"] for e in events if e["kind"] == "worker_added"}
    alive: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(bins))
    busy: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(bins))
    added = {}

    def add(arr: np.ndarray, a: float, b: float, n: int) -> None:
        lo = np.clip(edges[:-1], a, b)
        hi = np.clip(edges[1:], a, b)
        arr += (hi - lo) * n

    for e in events:
        if e["kind"] == "worker_added":
            added[e["worker"]] = (e["t"], e["device"])
        elif e["kind"] == "worker_removed" and e["worker"] in added:
            t0, dev = added.pop(e["worker"])
            add(alive[dev], t0, e["t"], devices_of[e["worker"]])
        elif e["kind"] in BUSY_KINDS and e.get("duration_s") and e["worker"] in devices_of:
            add(busy[e["device"]], e["t"] - e["duration_s"], e["t"], devices_of[e["worker"]])
    for w, (t0, dev) in added.items():
        add(alive[dev], t0, end, devices_of[w])
    fig, ax = figure(6.4, 3.2)
    centers = (edges[:-1] + edges[1:]) / 2
    for i, dev in enumerate(sorted(busy.keys() | alive.keys())):
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(alive[dev] > 0, busy[dev] / np.maximum(alive[dev], 1e-12), np.nan)
        ax.plot(centers, frac, label=dev, color="black", linestyle=LINESTYLES[i % len(LINESTYLES)])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(f"time since start (s), bins of {width:,.0f} s")
    ax.set_ylabel("busy fraction of allocated devices")
    ax.set_title(f"Utilization per device type: {label}")
    ax.legend(fontsize=7)
    return save(fig, out, f"{label}-utilization", pdf)


RUN_FIGURES = (timeline, population, utilization)
