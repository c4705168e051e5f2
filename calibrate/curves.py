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

from hetune.sim.errors import ConfigError
from hetune.sim.events import read_events
from hetune.sim.schema import to_mapping
from hetune.sim.surrogate import SurrogateParams
from hetune.sim.throughput import load_calibration
from hetune.sim.tomlfile import atomic_write_toml, read_toml

GRID = {
    "max_accuracy": np.linspace(0.3, 1.0, 15),
    "tau_iterations": np.geomspace(5, 5000, 31),
    "lr_opt": np.geomspace(1e-3, 100, 21),
    "width_decades": np.array([0.3, 0.45, 0.6, 0.8, 1.0, 1.5, 2.5]),
}


def _mesh(axes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {k: m.ravel() for k, m in zip(axes, mesh)}


def _sse(event_logs: list[list[dict[str, Any]]], g: dict[str, np.ndarray], chance: float,
         diverge_lr: float) -> tuple[np.ndarray, int]:
    """Sum of squared accuracy errors of every parameter set in ``g`` over the recorded chunks."""
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
    return sse, n


def fit_curves(event_logs: list[list[dict[str, Any]]], chance: float, diverge_lr: float = 50.0) -> tuple[SurrogateParams, dict[str, float]]:
    """Best surrogate parameters for the recorded runs and fit statistics.

    A coarse grid (GRID), then a fine grid spanning one coarse step around the best point.

    Args:
        event_logs: one event list per recorded run.
        chance: chance accuracy (1 / classes).
        diverge_lr: effective lr above which training makes no progress (kept fixed).
    """
    g = _mesh(GRID)
    sse, n = _sse(event_logs, g, chance, diverge_lr)
    if n < 3:
        raise ConfigError("events", "", f"only {n} recorded accuracies: too few to fit a learning curve")
    best = {k: float(v[int(np.argmin(sse))]) for k, v in g.items()}
    fine = {}
    for k, axis in GRID.items():
        i = int(np.argmin(np.abs(axis - best[k])))
        lo, hi = axis[max(0, i - 1)], axis[min(len(axis) - 1, i + 1)]
        fine[k] = np.geomspace(lo, hi, 9) if k != "max_accuracy" else np.linspace(lo, hi, 9)
    g = _mesh(fine)
    sse, n = _sse(event_logs, g, chance, diverge_lr)
    b = int(np.argmin(sse))
    params = SurrogateParams(
        chance_accuracy=chance, max_accuracy=min(1.0, float(g["max_accuracy"][b])),
        tau_iterations=float(g["tau_iterations"][b]), lr_opt=float(g["lr_opt"][b]),
        width_decades=float(g["width_decades"][b]), diverge_lr=diverge_lr,
        noise_std=float(math.sqrt(sse[b] / n)))
    return params, {"points": n, "rmse": math.sqrt(sse[b] / n)}


def read_logs(paths: list[str]) -> list[list[dict[str, Any]]]:
    """Event logs from events.jsonl files or run folders."""
    out = []
    for p in paths:
        path = Path(p)
        out.append(read_events(path / "events.jsonl" if path.is_dir() else path))
    return out


def run_calibration_file(events: str) -> Path:
    """The calibration.toml a run folder keeps beside its events."""
    p = Path(events)
    folder = p if p.is_dir() else p.parent
    if not (folder / "calibration.toml").is_file():
        raise ConfigError(str(folder), "", "no calibration.toml beside the events; name one with --calibration")
    return folder / "calibration.toml"


def write_curves(events: list[str], out: Path, model: str, dataset: str,
                 base_path: Path | None = None) -> tuple[SurrogateParams, dict[str, float]]:
    """Fit learning curves from recorded runs; write the base calibration plus them. (Trial overheads
    are calibrate's own Ray Tune probe, calibrate/overheads.py, never fitted from the runs compared.)

    Args:
        events: events.jsonl files or run folders.
        out: calibration file to write.
        model: the model the curves are for.
        dataset: "cifar10" or "cifar100" (chance accuracy).
        base_path: base calibration (default: the first run folder's calibration.toml).

    Returns:
        (fitted parameters, fit statistics).
    """
    logs = read_logs(events)
    base_path = base_path or run_calibration_file(events[0])
    load_calibration(base_path)  # refuse a broken base before fitting
    base = read_toml(base_path)
    params, stats = fit_curves(logs, chance=1.0 / (100 if dataset == "cifar100" else 10))
    base.setdefault("curves", {})[model] = to_mapping(params)
    base.setdefault("provenance", {})["curves"] = (
        f"fitted by hetune calibrate curves from {len(logs)} run(s) ({', '.join(events)}): "
        f"{stats['points']} accuracies, RMSE {stats['rmse']:.4f}")
    atomic_write_toml(out, base, header="Calibration with learning curves fitted from real runs "
                                        "(`hetune calibrate curves`).")
    load_calibration(out)
    return params, stats
