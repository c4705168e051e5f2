"""Adaptation figures: the policy objective over training, and where its choice ranks among all sequences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetune.plots.style import figure, save


def _table_accuracies(path: Path) -> tuple[list[float], float] | None:
    """A table CSV's accuracies sorted best first, and that of no adaptation (3, 3, 3); None if unreadable.

    Read here with pandas rather than through hetune.adapt: plots depends on result files only.
    """
    try:
        df = pd.read_csv(path, usecols=["a1", "a2", "a3", "acc"])
        none = df[(df.a1 == 3) & (df.a2 == 3) & (df.a3 == 3)].acc
        return sorted(df.acc.astype(float), reverse=True), float(none.iloc[0])
    except (OSError, ValueError, IndexError, pd.errors.ParserError):
        return None


def adaptation(history: list[dict[str, Any]], evaluations: list[dict[str, Any]], out: Path, label: str,
               pdf: bool = False) -> list[Path]:
    """Left: mean standardised reward per update against episodes. Right: accuracy of all 64 sequences
    of each evaluated table, sorted, with the policy's greedy choice and no-adaptation marked."""
    fig, axes = figure(9.0, 3.6, ncols=2)
    ep = [h["episodes"] for h in history]
    r = np.array([h["mean_reward"] for h in history])
    axes[0].plot(ep, r, color="0.6", linewidth=0.8, label="per update")
    if len(r) >= 10:
        k = max(1, len(r) // 20)
        axes[0].plot(ep[k - 1:], np.convolve(r, np.ones(k) / k, mode="valid"), color="black", label=f"mean of {k}")
    axes[0].set_xlabel("training episodes")
    axes[0].set_ylabel("reward (accuracy standardised per table)")
    axes[0].set_title("Policy objective")
    axes[0].legend(fontsize=7)
    ax = axes[1]
    for i, ev in enumerate(evaluations):
        table = _table_accuracies(Path(ev["table"]))
        if table is None:
            continue
        accs, no_adaptation = table
        ax.plot(range(1, len(accs) + 1), accs, color="0.5", linewidth=0.8)
        ax.scatter([ev["rank"]], [ev["accuracy"]], marker="*", s=80, color="black", zorder=3,
                   label="policy's choice" if i == 0 else None)
        ax.scatter([ev["no_adaptation_rank"]], [no_adaptation], marker="o", facecolors="none",
                   edgecolors="black", zorder=3, label="no adaptation" if i == 0 else None)
    ax.set_xlabel("rank among the 64 action sequences (1 = best)")
    ax.set_ylabel("final test accuracy")
    ax.set_title(f"Greedy choice on {len(evaluations)} table(s)")
    ax.legend(fontsize=7)
    fig.suptitle(f"Adaptation: {label}")
    return save(fig, out, f"{label}-adaptation", pdf)
