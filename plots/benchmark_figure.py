"""Fidelity benchmark figure: per strategy, the simulator's distribution of each outcome against the
real runs (files written by `hetune compare` into a benchmark's ``runs/<strategy>-s<seed>/``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from hetune.plots.style import figure, save
from hetune.sim.errors import ConfigError

PANELS = (("makespan_s", "makespan (s)"), ("time_to_target_s", "time to target (s)"),
          ("best_accuracy", "best accuracy"))


def runs_by_strategy(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each run folder's fidelity.json under ``folder/runs``, by the folder's name less ``-s<seed>``."""
    import json

    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(folder.glob("runs/*/fidelity.json")):
        name = f.parent.name
        try:
            fid = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(str(f), "", f"not readable JSON ({exc})") from None
        out[name.rsplit("-s", 1)[0] if "-s" in name else name].append(fid)
    return {k: v for k, v in out.items() if any("sim_spread" in f for f in v)}


def _real(fid: dict[str, Any], key: str) -> float | None:
    if key == "best_accuracy":
        best = fid["sim_spread"].get("best_accuracy") or {}
        return fid.get(best.get("key", "best_accuracy"), {}).get("real")
    return fid[key]["real"]


def _rows(runs: dict[str, list[dict[str, Any]]]) -> list[tuple[float, str, dict[str, Any]]]:
    """(y, label, fidelity) for every judged run, strategies apart by a gap, seeds in order."""
    out, y = [], 0.0
    for name in sorted(runs):
        for f in sorted((f for f in runs[name] if "sim_spread" in f), key=lambda f: f.get("seed", 0)):
            ttt, seeds = f["sim_spread"].get("time_to_target_s") or {}, f["sim_spread"].get("seeds", 0)
            reached = f" ({ttt['runs']}/{seeds} reached)" if ttt.get("runs", seeds) != seeds else ""
            out.append((y, f"{name} s{f.get('seed', '?')}{reached}", f))
            y += 1.0
        y += 0.6
    return out


def fidelity_benchmark(runs: dict[str, list[dict[str, Any]]], out: Path, label: str,
                       pdf: bool = False) -> list[Path]:
    """A panel per outcome, a row per real run beside the simulated seeds its compare drew (the same seeds
    for every run of a benchmark, so the rows of one strategy differ only where its runs' inputs did): the
    simulated seeds as a box (whiskers at 2.5% and
    97.5%: the 95% range), or as its range and median where a run's fidelity.json kept no values; the
    real run a black dot (a cross at the right edge: it never reached the target)."""
    rows = _rows(runs)
    fig, axes = figure(11.0, 1.0 + 0.3 * len(rows) + 0.1 * len(runs), ncols=len(PANELS), sharey=True)
    for ax, (key, title) in zip(axes, PANELS):
        for y, _, f in rows:
            d = f["sim_spread"].get(key) or {}
            if d.get("values"):
                ax.boxplot([d["values"]], positions=[y], orientation="horizontal", whis=(2.5, 97.5), widths=0.6,
                           showfliers=False, medianprops={"color": "black"}, boxprops={"color": "0.45"},
                           whiskerprops={"color": "0.45"}, capprops={"color": "0.45"})
            elif d.get("median") is not None:
                ax.plot([d["lo"], d["hi"]], [y, y], color="0.45", linewidth=3)
                ax.plot([d["median"]], [y], marker="|", color="black", markersize=10)
            v = _real(f, key)
            if v is None:
                ax.plot([1.0], [y], marker="x", color="black", transform=ax.get_yaxis_transform(), clip_on=False)
            else:
                ax.plot([v], [y], marker="o", color="black", markersize=4, linestyle="none", zorder=3)
        ax.set_xlabel(title)
        ax.set_yticks([y for y, _, _ in rows], [name for _, name, _ in rows], fontsize=7)
        ax.grid(axis="y", visible=False)  # a row's box is its own: no line across to the next panel
    axes[0].invert_yaxis()
    seeds = sorted({f["sim_spread"].get("seeds", 0) for _, _, f in rows})
    axes[1].set_title("simulated seeds that reached the target (all, unless the row says); x: the real run never "
                      "did", fontsize=8)
    fig.suptitle(f"Fidelity benchmark {label}: each real run (dot) against its own "
                 f"{'/'.join(str(n) for n in seeds)} simulated seeds (box, whiskers 95%)")
    return save(fig, out, f"{label}-fidelity-benchmark", pdf)
