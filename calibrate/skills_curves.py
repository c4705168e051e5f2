"""``hetune calibrate curves --kind skills``: read learning curves, fit the skills model, write a learning file.

Inputs, any mix of: the long learning-curve CSV (calibrate/curves_io.py ``csv_curves``), a digits
``runs.json`` (bench/bench_digits.py), hetune run folders or their events.jsonl, and Ray Tune experiment
folders (calibrate/tune_folder.py). From run folders and Ray Tune folders each trial's training from a
fresh network is one curve (a segment that starts from another trial's checkpoint, a PBT exploit, is
left out), and the trials of one run share its reading noise (their data order comes from the run's
seed). The output is a learning file an experiment names with ``[learning] path``: ``[learning]
kind = "skills"``, ``[learning.params]``, ``[learning.uncertainty]`` (what each simulated seed draws its
parameters from) and ``[fit]`` (each parameter's interval, what the data do not identify, the misfit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetune.calibrate.curve_design import MIN_LRS, design_curves
from hetune.calibrate.curves_io import add_segment, csv_curves, digits_runs, drop_prefixes
from hetune.calibrate.histories import History
from hetune.calibrate.skills_fit import Curve, FitResult, FitSettings, fit
from hetune.sim.errors import ConfigError
from hetune.sim.skills import SkillsParams
from hetune.sim.tomlfile import atomic_write_toml



def read_curves(paths: list[str], metric: str = "accuracy", loss_metric: str = "loss", batch: int | None = None,
                momentum: float | None = None, scale: float = 1.0) -> list[Curve]:
    """Every curve of the named inputs (see the module docstring)."""
    from hetune.calibrate.nqm_curves import read_histories

    out: list[Curve] = []
    for i, p in enumerate(paths):
        path = Path(p)
        if path.suffix == ".csv":
            if not path.is_file():
                raise ConfigError(p, "", "no such file")
            out += csv_curves(path, scale)
        elif path.name == "runs.json":
            out += digits_runs(path)
        elif (path / "design.json").is_file():  # a design folder (hetune calibrate curves --design)
            out += design_curves(path)
        else:
            out += [c for h in read_histories([p], metric, loss_metric, batch, momentum, scale)
                    if (c := from_history(h, i, scale)) is not None]
    return drop_prefixes(out)


def from_history(h: History, seed: int, scale: float = 1.0) -> Curve | None:
    """A trial's training from a fresh network as a curve (None if it has no reading there)."""
    first = h.segments[0]
    if first.origin is not None:
        return None
    segs: list[tuple[float, float, int]] = []
    readings: list[tuple[int, float]] = []
    for r in first.readings:  # read_histories checked every accuracy against the scale
        add_segment(segs, r.lr, r.momentum, r.iteration)
        if r.accuracy is not None:
            readings.append((r.iteration, r.accuracy / scale))
    return Curve(h.key, seed, tuple(segs), tuple(readings), h.batch) if readings else None


def check_design(curves: list[Curve], where: str) -> None:
    """ConfigError where the curves cannot identify the model's lr dependence."""
    lrs = sorted({c.segments[0][0] for c in curves if c.segments})
    if len(lrs) < MIN_LRS:
        raise ConfigError(where, "", f"{len(curves)} curve(s) at {len(lrs)} starting learning rate(s) "
                                     f"({', '.join(f'{v:g}' for v in lrs) or 'none'}): the skills model needs runs at "
                                     f"{MIN_LRS} or more, spanning the search space (hetune calibrate curves --kind "
                                     "skills names what each identifies)")


def write_fit(paths: list[str], out: Path, prior: SkillsParams, settings: FitSettings | None = None,
              **read: Any) -> FitResult:
    """Read, fit and write the learning file ``out`` (nothing is written if reading or fitting fails)."""
    curves = read_curves(paths, **read)
    check_design(curves, " ".join(paths))
    result = fit(curves, prior, settings)
    atomic_write_toml(out, result.learning_file(inputs=[str(p) for p in paths]))
    return result


def describe(r: FitResult) -> list[str]:
    """Lines for the terminal: the misfit, each parameter with its interval, what is not identified."""
    lines = [f"RMSE {r.rmse:.4f} over {r.readings} readings of {r.runs} runs; residual lag-1 {r.residual_lag1:.2f}"]
    for name, (lo, hi) in r.intervals.items():
        mark = "  not identified" if name in r.unidentified else ""
        lines.append(f"{name}: {getattr(r.params, name):.4g} (95% {lo:.3g} to {hi:.3g}){mark}")
    p = r.params
    lines.append(f"reading noise: own {p.ar_std:.3f} (correlation {p.ar_corr_50:.2f} over 50 iterations), "
                 f"shared by a run's trials {p.shared_std:.3f}")
    if r.unidentified:
        lines.append("not identified (interval wider than its range): " + ", ".join(r.unidentified) + "; runs at more "
                     "learning rates (the powers, the temperature), and drops at about 1/3 and 2/3 of the horizon "
                     "(the floor against the skills), narrow them")
    return lines
