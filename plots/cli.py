"""``hetune plots``: find result files, make every figure each supports, report bad inputs by name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import json

from hetune.plots.benchmark_figure import fidelity_benchmark, runs_by_strategy
from hetune.plots.calibration_figure import calibration
from hetune.plots.fidelity_figure import fidelity
from hetune.plots.run_figures import RUN_FIGURES
from hetune.plots.sweep_figures import SWEEP_FIGURES
from hetune.sim.errors import ConfigError
from hetune.sim.events import read_events
from hetune.sim.sweep import read_csv
from hetune.sim.throughput import load_calibration


def discover(results: Path = Path("results"), calibrations: Path = Path("configs/calibration")) -> list[Path]:
    """Every run or sweep folder under ``results`` and every calibration file, sorted."""
    found: set[Path] = set()
    if results.is_dir():
        for f in results.rglob("*"):
            if f.name in ("events.jsonl", "sweep.csv", "policy.json"):
                found.add(f.parent)
            elif f.name == "fidelity.json" and f.parent.parent.name == "runs":  # a fidelity benchmark's run
                found.add(f.parent.parent.parent)
    if calibrations.is_dir():
        found.update(p for p in calibrations.glob("*.toml"))
    return sorted(found)


def _label(path: Path) -> str:
    return path.stem if path.is_file() else path.name


def plot_one(path: Path, out: Path, pdf: bool) -> list[Path]:
    """All figures for one input (a run folder, sweep folder or calibration file)."""
    made: list[Path] = []
    label = _label(path)
    if path.is_file() and path.suffix == ".toml":
        return calibration(load_calibration(path), out, label, pdf)
    if not path.is_dir():
        raise ConfigError(str(path), "", "not found")
    recognised = False
    if (path / "sweep.csv").is_file():
        recognised = True
        rows = read_csv(path / "sweep.csv")
        if not rows:
            raise ConfigError(str(path / "sweep.csv"), "", "no rows")
        for fn in SWEEP_FIGURES:
            made += fn(rows, out, label, pdf)
    if (path / "events.jsonl").is_file():
        recognised = True
        events = read_events(path / "events.jsonl")
        if not events:
            raise ConfigError(str(path / "events.jsonl"), "", "no events")
        for run_fn in RUN_FIGURES:
            made += run_fn(events, out, label, pdf)
        if (path / "fidelity.json").is_file() and (path / "sim-events.jsonl").is_file():
            fid = json.loads((path / "fidelity.json").read_text())
            made += fidelity(events, read_events(path / "sim-events.jsonl"), fid, out, label, pdf)
    bench = runs_by_strategy(path)
    if bench:
        recognised = True
        made += fidelity_benchmark(bench, out, label, pdf)
    if (path / "policy.json").is_file() and (path / "history.json").is_file():
        recognised = True
        from hetune.plots.adapt_figure import adaptation
        evals = path / "evaluation.json"
        made += adaptation(json.loads((path / "history.json").read_text()),
                           json.loads(evals.read_text()) if evals.is_file() else [], out, label, pdf)
    if not recognised:
        raise ConfigError(str(path), "", "no recognisable results (expected events.jsonl, sweep.csv, policy.json, "
                          "runs/*/fidelity.json or a calibration .toml)")
    return made


def run_plots(inputs: list[str], out: Path, all_results: bool = False, pdf: bool = False,
              report: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> int:
    """Make figures for every input; a bad input is reported by name and the others still plotted.

    Returns 0 when every input was plotted, 2 when any was refused.
    """
    paths = [Path(p) for p in inputs] + (discover() if all_results else [])
    if not paths:
        report("hetune: error: plots: nothing to plot (name result folders or use --all)")
        return 2
    failed = 0
    made: list[Path] = []
    for p in paths:
        try:
            made += plot_one(p, out, pdf)
        except ConfigError as exc:
            failed += 1
            report(f"hetune: error: {exc.line()}")
    print(f"{len(made)} figure file(s) in {out}")
    return 2 if failed else 0
