"""``hetune calibrate curves``: fit the learning-curve surrogate to recorded real runs.

Replays each recorded run's events (trial starts with their configs, chunks
with accuracies, exploits copying the donor's checkpointed state, explores
changing the config) under every parameter set of a grid, and keeps the set
with the least squared error between predicted and recorded accuracies.
chance_accuracy is fixed at 1 / classes and diverge_lr at its default; the
noise is the residual standard deviation at the best fit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import ConfigError
from sim.events import read_events
from sim.surrogate import SurrogateParams

GRID = {
    "max_accuracy": np.linspace(0.3, 1.0, 15),
    "tau_iterations": np.geomspace(5, 5000, 31),
    "lr_opt": np.geomspace(1e-3, 100, 21),
    "width_decades": np.array([0.3, 0.45, 0.6, 0.8, 1.0, 1.5, 2.5]),
}


def _grid() -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*GRID.values(), indexing="ij")
    return {k: m.ravel() for k, m in zip(GRID, mesh)}


def fit_curves(event_logs: list[list[dict[str, Any]]], chance: float, diverge_lr: float = 50.0) -> tuple[SurrogateParams, dict[str, float]]:
    """Best surrogate parameters for the recorded runs and fit statistics.

    Args:
        event_logs: one event list per recorded run.
        chance: chance accuracy (1 / classes).
        diverge_lr: effective lr above which training makes no progress (kept fixed).
    """
    g = _grid()
    m = len(g["max_accuracy"])
    sse = np.zeros(m)
    n = 0
    for events in event_logs:
        progress: dict[int, np.ndarray] = {}
        config: dict[int, dict[str, float]] = {}
        ckpt: dict[tuple[int, int], np.ndarray] = {}
        for e in events:
            t = e["trial"]
            if e["kind"] == "trial_start":
                progress[t] = np.zeros(m)
                config[t] = dict(e["config"])
            elif e["kind"] == "chunk" and t in progress:
                cfg = config[t]
                lr_eff = float(cfg.get("lr", 0.1)) / max(1.0 - float(cfg.get("momentum", 0.0)), 1e-6)
                if 0 < lr_eff <= diverge_lr:
                    z = np.log10(lr_eff / g["lr_opt"]) / g["width_decades"]
                    progress[t] = progress[t] + int(e["iterations"]) * np.exp(-0.5 * z * z)
                pred = chance + (g["max_accuracy"] - chance) * (1.0 - np.exp(-progress[t] / g["tau_iterations"]))
                sse += (pred - float(e["accuracy"])) ** 2
                n += 1
                ckpt[(t, int(e["iteration"]))] = progress[t].copy()
            elif e["kind"] == "exploit" and t in progress:
                donor = ckpt.get((e["donor"], int(e["donor_iteration"])))
                if donor is not None:
                    progress[t] = donor.copy()
            elif e["kind"] == "explore" and t in config:
                config[t] = dict(e["new_config"])
    if n < 3:
        raise ConfigError("events", "", f"only {n} recorded accuracies: too few to fit a learning curve")
    best = int(np.argmin(sse))
    params = SurrogateParams(
        chance_accuracy=chance, max_accuracy=float(g["max_accuracy"][best]),
        tau_iterations=float(g["tau_iterations"][best]), lr_opt=float(g["lr_opt"][best]),
        width_decades=float(g["width_decades"][best]), diverge_lr=diverge_lr,
        noise_std=float(math.sqrt(sse[best] / n)))
    return params, {"points": n, "rmse": math.sqrt(sse[best] / n)}


def read_logs(paths: list[str]) -> list[list[dict[str, Any]]]:
    """Event logs from events.jsonl files or run folders."""
    out = []
    for p in paths:
        path = Path(p)
        out.append(read_events(path / "events.jsonl" if path.is_dir() else path))
    return out
