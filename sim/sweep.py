"""Sweeps: the grid strategies x seeds, run in parallel, resumable, ranked.

sweep.csv holds one row per (strategy, seed) with the metric set's names. It
is rewritten atomically after every finished cell, so an interrupted sweep
keeps every finished cell and ``--resume`` runs only the rest.
"""

from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from hetune.sim import plugins
from hetune.sim.engine import simulate
from hetune.sim.errors import ConfigError
from hetune.sim.loader import load_inputs
from hetune.sim.results import run_summary
from hetune.sim.snapshot import MANIFEST, inputs_hash, write_snapshot
from hetune.sim.standings import ranking
from hetune.sim.tomlfile import atomic_replace, atomic_write_json, atomic_write_text

FIRST_COLUMNS = ["strategy", "seed", "time_to_target_s", "makespan_s", "best_accuracy", "best_accuracy_at_budget",
                 "cost", "exploits", "failures", "trials_failed", "lost_iterations",
                 "checkpoint_overhead_s", "migration_overhead_s"]
INT_COLUMNS = ("seed", "exploits", "world", "failures", "trials_failed", "lost_iterations")  # counts


@dataclass(frozen=True)
class Cell:
    """One simulation of a sweep.

    Args:
        experiment: experiment file path.
        overrides: ``--set`` strings.
        strategy: strategy name.
        seed: seed.
        max_events: events a run may log before it stops (``--max-events``); None: no limit.
        plugins: plug-in module names the cell imports first (a Ray task's worker has not seen ``--plugin``).
    """

    experiment: str
    overrides: tuple[str, ...]
    strategy: str
    seed: int
    max_events: int | None = None
    plugins: tuple[str, ...] = ()  # plug-in modules imported (by name) before the cell's experiment is read


def run_cell(cell: Cell) -> dict[str, Any]:
    """Simulate one cell and return its summary row (runs in a worker process or Ray task)."""
    for name in cell.plugins:
        plugins.load(name, "sweep cell", "")
    inputs = load_inputs(cell.experiment, list(cell.overrides))
    result = simulate(inputs, inputs.make_strategy(cell.strategy), cell.seed, max_events=cell.max_events)
    return run_summary(inputs, result.events, cell.strategy, cell.seed)


class Executor(Protocol):
    """Runs cells somewhere and yields their results as they finish."""

    def map_unordered(self, fn: Callable[[Cell], dict[str, Any]],
                      cells: Sequence[Cell]) -> Iterator[dict[str, Any]]: ...


class LocalExecutor:
    """Cells in ``jobs`` local processes (in-process when jobs == 1).

    Args:
        jobs: parallel processes.
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def map_unordered(self, fn: Callable[[Cell], dict[str, Any]], cells: Sequence[Cell]) -> Iterator[dict[str, Any]]:
        if self.jobs <= 1:
            for c in cells:
                yield fn(c)
            return
        # Workers ignore SIGINT and the parent ends them: a Ctrl-C (or a failed cell) stops the sweep at
        # once, where a pool that holds every cell queued would first run them all (its exit waits).
        pool = multiprocessing.Pool(self.jobs, initializer=_ignore_sigint)
        try:
            yield from pool.imap_unordered(fn, cells)
        except BaseException:
            pool.terminate()
            pool.join()
            raise
        pool.close()
        pool.join()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """CSV columns: the fixed ones first, then per-device-type ones sorted."""
    extra = sorted({k for r in rows for k in r} - set(FIRST_COLUMNS) - {"experiment"})
    return FIRST_COLUMNS + extra


def _row_order(r: dict[str, Any]) -> tuple:
    return (r["strategy"], int(r.get("world") or 0), int(r["seed"]))  # world: sensitivity sweeps


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write sweep rows (sorted by strategy, seed) atomically; null becomes an empty cell."""
    buf = io.StringIO()
    cols = columns(rows)
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in sorted(rows, key=_row_order):
        w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in cols})
    atomic_write_text(path, buf.getvalue())


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    """The same rows as a typed Parquet table (pandas + pyarrow) for large sweeps, atomically."""
    import pandas as pd

    frame = pd.DataFrame(sorted(rows, key=_row_order), columns=columns(rows))
    atomic_replace(path, lambda tmp: frame.to_parquet(tmp, index=False))


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Read sweep rows back (numbers parsed, empty cells as None)."""
    out = []
    with path.open(newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh), 2):
            parsed: dict[str, Any] = {}
            for k, v in row.items():
                if k is None or v is None:
                    raise ConfigError(f"{path}:{n}", "", "row has the wrong number of cells")
                if k == "strategy":
                    parsed[k] = v
                elif v == "":
                    parsed[k] = None
                else:
                    try:
                        parsed[k] = int(v) if k in INT_COLUMNS else float(v)
                    except ValueError:
                        raise ConfigError(f"{path}:{n}", k, f"not a number: {v!r}") from None
            out.append(parsed)
    return out


def run_sweep(experiment: str, overrides: list[str], strategies: list[str], seeds: Sequence[int], out_dir: Path,
              executor: Executor, resume: bool = False,
              progress: Callable[[int, int], Any] | None = None, max_events: int | None = None) -> list[dict[str, Any]]:
    """Run (or finish) a sweep and write its input snapshot (sim/snapshot.py), sweep.csv and ranking.json
    into ``out_dir``.

    Args:
        experiment: experiment file.
        overrides: ``--set`` strings.
        strategies: strategy names.
        seeds: seeds.
        out_dir: the sweep folder.
        executor: where cells run.
        resume: keep finished cells of an earlier sweep in ``out_dir`` (same config) and run the rest.
        progress: called with (done, total) after each cell.
        max_events: events one simulation may log before the sweep stops (finished rows are kept).
    """
    inputs = load_inputs(experiment, overrides)
    for s in strategies:
        inputs.strategy_params(s)  # refuse bad parameters before anything runs
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "sweep.csv"
    rows: list[dict[str, Any]] = []
    if resume and csv_path.exists():
        manifest = out_dir / MANIFEST
        try:
            old_hash = json.loads(manifest.read_text()).get("inputs_hash")
        except (OSError, ValueError, AttributeError):
            old_hash = None
        if old_hash != inputs_hash(inputs):
            raise ConfigError(str(manifest), "", "this sweep folder was made with other inputs (experiment, cluster "
                              "or calibration); use another --out or drop --resume")
        rows = [r for r in read_csv(csv_path) if r["strategy"] in strategies and int(r["seed"]) in set(seeds)]
    write_snapshot(out_dir, inputs, "sweep", 0, frozen="before the sweep's cells ran")
    done = {(r["strategy"], int(r["seed"])) for r in rows}
    cells = [Cell(experiment, tuple(overrides), s, seed, max_events, tuple(sorted(plugins.LOADED)))
             for s in strategies for seed in seeds if (s, seed) not in done]
    total = len(strategies) * len(seeds)
    if progress:
        progress(len(done), total)
    for row in executor.map_unordered(run_cell, cells):
        row.pop("experiment", None)
        rows.append(row)
        write_csv(csv_path, rows)
        if progress:
            progress(len(rows), total)
    write_csv(csv_path, rows)
    write_parquet(out_dir / "sweep.parquet", rows)
    info = inputs.experiment.experiment
    rank = ranking(rows, objective=info.objective, budget=info.budget_mode)
    atomic_write_json(out_dir / "ranking.json", {"experiment": info.name, "objective": info.objective,
                                                 "best": rank[0]["strategy"] if rank else None,
                                                 "strategies": _json_safe(rank)})
    return rows


def _json_safe(rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in e.items()} for e in rank]
