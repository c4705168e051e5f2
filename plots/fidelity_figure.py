"""Fidelity figure: a real run against the simulator's prediction of it (files written by `hetune compare`)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from hetune.plots.style import figure, save


def _progress(events: list[dict[str, Any]]) -> dict[int, list[tuple[float, int]]]:
    by: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for e in events:
        if e["kind"] == "chunk":
            by[e["trial"]].append((e["t"], e["iteration"]))
    return by


def fidelity(real: list[dict[str, Any]], sim: list[dict[str, Any]], fid: dict[str, Any], out: Path, label: str,
             pdf: bool = False) -> list[Path]:
    """Left: per-trial iteration over time, real (solid) and simulated (dashed). Right: error per metric."""
    fig, axes = figure(9.0, 3.8, ncols=2)
    ax = axes[0]
    for style, events, name in (("-", real, "real"), ("--", sim, "simulated")):
        for i, (t, pts) in enumerate(sorted(_progress(events).items())):
            xs, ys = zip(*pts)
            ax.plot(xs, ys, linestyle=style, color="black" if name == "real" else "0.5", linewidth=1,
                    label=name if i == 0 else None)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("trial iteration")
    ax.set_title("Per-trial progress: real vs simulated")
    ax.legend(fontsize=7)
    names, vals = [], []
    for key, name in (("makespan_error_pct", "makespan"), ("time_to_target_error_pct", "time to target"),
                      ("replay_makespan_error_pct", "makespan (replay)")):
        if fid.get(key) is not None:
            names.append(name)
            vals.append(fid[key])
    for dev, v in sorted((fid.get("step_time_error_pct") or {}).items()):
        if v is not None:
            names.append(f"s/iteration {dev}")
            vals.append(v)
    axes[1].barh(names, vals, color="0.6", edgecolor="black", hatch="//")
    axes[1].axvline(0, color="black", linewidth=1)
    axes[1].invert_yaxis()
    axes[1].set_xlabel("error, % ((simulated - real) / real)")
    axes[1].set_title(f"Simulator error (exploits real {fid['exploits']['real']}, sim {fid['exploits']['sim']})")
    fig.suptitle(f"Fidelity: {label} ({fid['strategy']})")
    return save(fig, out, f"{label}-fidelity", pdf)
