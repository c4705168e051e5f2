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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetune.sim.errors import ConfigError
from hetune.sim.events import read_events
from hetune.sim.schema import to_mapping
from hetune.sim.surrogate import SurrogateParams, effective_lr, noise_scale_factor
from hetune.sim.throughput import load_calibration
from hetune.sim.tomlfile import atomic_write_toml, read_toml

GRID = {
    "max_accuracy": np.linspace(0.3, 1.0, 15),
    "tau_iterations": np.geomspace(5, 5000, 31),
    "lr_opt": np.geomspace(1e-3, 100, 21),
    "width_decades": np.array([0.3, 0.45, 0.6, 0.8, 1.0, 1.5, 2.5]),
}
SHAPE_GRID = np.array([0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0])  # the curve's exponent, scanned with tau
NOISE_BATCH_GRID = np.geomspace(4, 16384, 13)  # examples; scanned only when the runs used several batch sizes
DIVERGE_STEPS = np.geomspace(1.25, 1000, 30)  # diverge_lr candidates, as multiples of the fitted lr_opt


@dataclass
class Run:
    """One recorded run: its events and its global batch (None: no config.toml beside the events)."""

    events: list[dict[str, Any]]
    batch: int | None


def _mesh(axes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {k: m.ravel() for k, m in zip(axes, mesh)}


def _replay(runs: list[Run], g: dict[str, np.ndarray], chance: float, ref_batch: float
            ) -> tuple[np.ndarray, np.ndarray, int]:
    """Squared errors of every parameter set in ``g`` over the recorded accuracies.

    ``g`` maps each SurrogateParams field fitted here (max_accuracy, tau_iterations, lr_opt,
    width_decades, shape, diverge_lr, noise_batch) to an array, one entry per parameter set; the curve is
    stated at ``ref_batch`` and each run trains at its own batch (sim/surrogate.py's s(B)).

    Returns:
        (sum of squared errors, sum of squared differences of consecutive residuals of one trial with
        no exploit between them, number of accuracies), each per parameter set where an array.
    """
    m = len(g["max_accuracy"])
    sse, lag = np.zeros(m), np.zeros(m)
    n = 0
    for run in runs:
        batch = float(run.batch or ref_batch)
        s = noise_scale_factor(g["noise_batch"], ref_batch, batch)
        lr_opt, diverge, tau = g["lr_opt"] * s, g["diverge_lr"] * s, g["tau_iterations"]
        progress: dict[int, np.ndarray] = {}
        config: dict[int, dict[str, float]] = {}
        ckpt: dict[tuple[int, int], np.ndarray] = {}
        last: dict[int, np.ndarray] = {}  # the trial's previous residual (dropped by an exploit)
        for e in run.events:
            t = e["trial"]
            if e["kind"] == "trial_start":
                progress[t] = np.zeros(m)
                config[t] = dict(e["config"])
                last.pop(t, None)
            elif e["kind"] == "chunk" and t in progress:
                lr_eff = effective_lr(config[t])
                if lr_eff > 0:
                    z = np.log10(lr_eff / lr_opt) / g["width_decades"]
                    q = np.where(lr_eff > diverge, 0.0, np.exp(-0.5 * z * z))
                    progress[t] = progress[t] + int(e["iterations"]) * s * q
                ckpt[(t, int(e["iteration"]))] = progress[t].copy()
                if not _evaluated(e):
                    continue
                pred = chance + (g["max_accuracy"] - chance) * (1.0 - np.exp(-((progress[t] / tau) ** g["shape"])))
                r = float(e["accuracy"]) - pred
                sse += r * r
                n += 1
                if t in last:
                    lag += (r - last[t]) ** 2
                last[t] = r
            elif e["kind"] == "exploit" and t in progress:
                donor = ckpt.get((e["donor"], int(e["donor_iteration"])))
                if donor is not None:
                    progress[t] = donor.copy()
                last.pop(t, None)
            elif e["kind"] == "explore" and t in config:
                config[t] = dict(e["new_config"])
    return sse, lag, n


def _evaluated(e: dict[str, Any]) -> bool:
    """Did this chunk end with an evaluation? (A chunk ending between evaluations repeats the trial's
    last accuracy with ``eval_s`` 0.)"""
    return e.get("accuracy") is not None and float(e.get("eval_s", 1.0) or 0.0) > 0


def _full(g: dict[str, np.ndarray], **fixed: float) -> dict[str, np.ndarray]:
    m = len(next(iter(g.values())))
    return {**g, **{k: np.full(m, v) for k, v in fixed.items()}}


def _best(runs, g, chance, ref_batch) -> tuple[dict[str, float], float, float, int]:
    sse, lag, n = _replay(runs, g, chance, ref_batch)
    if n < 3:
        raise ConfigError("events", "", f"only {n} recorded accuracies: too few to fit a learning curve")
    b = int(np.argmin(sse))
    return {k: float(v[b]) for k, v in g.items()}, float(sse[b]), float(lag[b]), n


def fit_curves(runs: list[Run], chance: float, diverge_lr: float = 50.0,
               noise_batch: float = 1000.0) -> tuple[SurrogateParams, dict[str, Any]]:
    """Best surrogate parameters for the recorded runs and what the data identified.

    1. a coarse grid over max_accuracy, tau, lr_opt and width with no divergence and shape 1; then
       the shape with max_accuracy and tau; then (when the runs used more than one batch size) the
       gradient noise scale alone; then the grid again; 2. diverge_lr scanned above the fitted
       optimum: kept only where the data show it (trials at a higher effective lr that did not learn);
       3. a fine grid one coarse step around the best point. Evaluation noise is measured from
       consecutive evaluations of one trial: residuals r_k, r_k+1 differ by noise twice over while a
       slow misfit of the curve cancels, so noise_std = sqrt(mean((r_k+1 - r_k)^2) / 2); the residual
       RMSE, which also holds the misfit, is reported beside it.

    Args:
        runs: the recorded runs.
        chance: chance accuracy (1 / classes).
        diverge_lr: kept when the data do not bound the divergence point.
        noise_batch: kept when the runs used one batch size.

    Returns:
        (parameters stated at the runs' batch, or at the smallest when several; statistics).
    """
    batches = sorted({r.batch for r in runs if r.batch})
    ref = float(batches[0]) if batches else 1.0
    several = len(batches) > 1
    best = _coarse(runs, chance, ref, several, noise_batch)
    axes = dict(GRID, shape=SHAPE_GRID, **({"noise_batch": NOISE_BATCH_GRID} if several else {}))
    # 2. divergence: candidates above the optimum, and "none" (inf)
    cands = np.append(best["lr_opt"] * DIVERGE_STEPS, np.inf)
    g = {k: np.full(len(cands), v) for k, v in best.items()}
    g["diverge_lr"] = cands
    sse, _, _ = _replay(runs, g, chance, ref)
    # identified only when diverging fits clearly better than never diverging (1% less error)
    i = int(np.argmin(sse))
    identified = bool(np.isfinite(cands[i]) and sse[i] < 0.99 * sse[-1])
    best["diverge_lr"] = float(cands[i]) if identified else max(diverge_lr, _max_lr_eff(runs, best, ref) * 1.01)
    # 3. fine grid around the coarse best
    fine = {}
    for k, axis in axes.items():
        j = int(np.argmin(np.abs(axis - best[k])))
        lo, hi = axis[max(0, j - 1)], axis[min(len(axis) - 1, j + 1)]
        n_pts = 3 if k in ("noise_batch", "shape") else 9
        fine[k] = np.linspace(lo, hi, n_pts) if k == "max_accuracy" else np.geomspace(lo, hi, n_pts)
    g = _mesh(fine)
    fixed = {"diverge_lr": best["diverge_lr"] / best["lr_opt"]}  # kept relative to the optimum
    g["diverge_lr"] = g["lr_opt"] * fixed["diverge_lr"]
    if not several:
        g = _full(g, noise_batch=noise_batch)
    best, sse_b, lag_b, n = _best(runs, g, chance, ref)
    pairs = _pairs(runs)
    rmse = math.sqrt(sse_b / n)
    noise = math.sqrt(lag_b / (2 * pairs)) if pairs else rmse
    params = SurrogateParams(
        chance_accuracy=chance, max_accuracy=min(1.0, best["max_accuracy"]), tau_iterations=best["tau_iterations"],
        lr_opt=best["lr_opt"], width_decades=best["width_decades"], diverge_lr=best["diverge_lr"], shape=best["shape"],
        noise_std=min(noise, rmse), ref_batch=ref if several else 0.0, noise_batch=best["noise_batch"])
    return params, {"points": n, "rmse": rmse, "noise_pairs": pairs, "batches": batches,
                    "diverge_identified": identified, "noise_batch_fitted": several}


def _coarse(runs: list[Run], chance: float, ref: float, several: bool, noise_batch: float) -> dict[str, float]:
    """Step 1 of fit_curves: the coarse grid, no divergence, shape 1; then by coordinate descent the
    shape with max_accuracy and tau, the noise scale alone (several batch sizes), and the grid again."""
    g = _mesh(GRID)
    best, *_ = _best(runs, _full(g, diverge_lr=np.inf, noise_batch=noise_batch, shape=1.0), chance, ref)
    h = _mesh({"shape": SHAPE_GRID, "tau_iterations": GRID["tau_iterations"], "max_accuracy": GRID["max_accuracy"]})
    best, *_ = _best(runs, _full(h, **{k: v for k, v in best.items() if k not in h}), chance, ref)
    if several:
        h = {k: np.full(len(NOISE_BATCH_GRID), v) for k, v in best.items()}
        best, *_ = _best(runs, dict(h, noise_batch=NOISE_BATCH_GRID), chance, ref)
    best, *_ = _best(runs, _full(g, diverge_lr=np.inf, noise_batch=best["noise_batch"], shape=best["shape"]),
                     chance, ref)
    return best


def _max_lr_eff(runs: list[Run], best: dict[str, float], ref: float) -> float:
    """The highest effective lr any recorded chunk trained at, restated at ``ref`` (a lower bound
    on diverge_lr when the data show no divergence)."""
    top = 0.0
    for run in runs:
        b = float(run.batch or ref)
        s = noise_scale_factor(best["noise_batch"], ref, b)
        config: dict[int, dict[str, float]] = {}
        for e in run.events:
            if e["kind"] == "trial_start":
                config[e["trial"]] = dict(e["config"])
            elif e["kind"] == "explore":
                config[e["trial"]] = dict(e["new_config"])
            elif e["kind"] == "chunk" and e["trial"] in config:
                top = max(top, effective_lr(config[e["trial"]]) / s)
    return top


def _pairs(runs: list[Run]) -> int:
    """Consecutive evaluations of one trial with no restart or exploit between them."""
    n = 0
    for run in runs:
        seen: set[int] = set()
        for e in run.events:
            t = e["trial"]
            if e["kind"] in ("trial_start", "exploit"):
                seen.discard(t)
            elif e["kind"] == "chunk" and _evaluated(e):
                n += t in seen
                seen.add(t)
    return n


def read_runs(paths: list[str]) -> list[Run]:
    """Recorded runs from events.jsonl files or run folders, each with the batch size its folder's
    config.toml names (None where there is none)."""
    out = []
    for p in paths:
        path = Path(p)
        folder = path if path.is_dir() else path.parent
        batch = None
        if (folder / "config.toml").is_file():
            batch = int(read_toml(folder / "config.toml").get("experiment", {}).get("batch_size", 0)) or None
        out.append(Run(read_events(path / "events.jsonl" if path.is_dir() else path), batch))
    known = {r.batch for r in out if r.batch}
    if len(known) > 1 and any(r.batch is None for r in out):
        missing = next(p for p, r in zip(paths, out) if r.batch is None)
        raise ConfigError(missing, "", "no config.toml beside these events, so their batch size is unknown; "
                                       "the other runs used several batch sizes")
    return out


def describe(params: SurrogateParams, stats: dict[str, Any]) -> list[str]:
    """What the fit identified and what it kept, in words (for the provenance and the terminal)."""
    batches = ", ".join(str(b) for b in stats["batches"]) or "unknown"
    return [
        f"batch size(s) {batches}: " + (f"gradient noise scale fitted, {params.noise_batch:.0f} examples, curve stated "
                                        f"at batch {params.ref_batch:.0f}" if stats["noise_batch_fitted"] else
                                        "one batch size, so no batch-size effect fitted (the curve holds at it)"),
        f"diverge_lr {params.diverge_lr:.3g} "
        + ("fitted (trials above it did not learn)" if stats["diverge_identified"]
           else "not shown by the data (kept at or above every lr that trained)"),
        f"evaluation noise {params.noise_std:.4f} from {stats['noise_pairs']} consecutive evaluations of one trial",
    ]


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
    from hetune.calibrate.tune_folder import is_tune_folder

    for e in events:  # the bell curve reads hetune's own run folders; a Tune folder goes to the models that read it
        if is_tune_folder(Path(e)):
            raise ConfigError(e, "", "a Ray Tune experiment folder: --kind bell reads hetune run folders "
                                     "(events.jsonl); --kind nqm or --kind skills read Ray Tune folders")
    runs = read_runs(events)
    base_path = base_path or run_calibration_file(events[0])
    load_calibration(base_path)  # refuse a broken base before fitting
    base = read_toml(base_path)
    params, stats = fit_curves(runs, chance=1.0 / (100 if dataset == "cifar100" else 10))
    base.setdefault("curves", {})[model] = to_mapping(params)
    names = ", ".join(relative_name(e, out) for e in events)
    base.setdefault("provenance", {})["curves"] = (
        f"fitted by hetune calibrate curves from {len(runs)} run(s) ({names}): "
        f"{stats['points']} accuracies, RMSE {stats['rmse']:.4f}; " + "; ".join(describe(params, stats)))
    atomic_write_toml(out, base, header="Calibration with learning curves fitted from real runs "
                                        "(`hetune calibrate curves`).")
    load_calibration(out)
    return params, stats


def relative_name(run: str, out: Path) -> str:
    """A recorded run as the calibration names it: relative to the calibration's folder where it can
    be, so that no path of the machine that fitted it is written into a committed file."""
    import os

    try:
        return os.path.relpath(Path(run).resolve(), Path(out).resolve().parent)
    except ValueError:  # another drive
        return Path(run).name
