"""Mean and spread of repeated real runs (the original system's --exp_times summary)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hetune.sim.tomlfile import atomic_write_json


def summarize_repeats(summaries: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """Mean, standard deviation, min and max of runtime (makespan) and best accuracy; written to ``path``.

    Args:
        summaries: summary.json contents of each repeat.
        path: where to write repeats.json.
    """
    out: dict[str, Any] = {"runs": len(summaries), "seeds": [s["seed"] for s in summaries]}
    for key in ("makespan_s", "best_accuracy", "time_to_target_s"):
        vals = [float(s[key]) for s in summaries if s.get(key) is not None]
        out[key] = {"mean": statistics.fmean(vals) if vals else None,
                    "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
                    "min": min(vals) if vals else None, "max": max(vals) if vals else None, "n": len(vals)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, out)
    return out
