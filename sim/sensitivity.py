"""How robust is a recommendation? The sweep re-run in perturbed worlds.

A world multiplies the calibration and the learning model's parameters by factors drawn from the
experiment's [sensitivity] ranges (log-uniform in each [low, high]; step times and overheads
drawn per device type). Every strategy runs every seed in every world; per world a strategy's
score is its median over seeds of the experiment's objective. Reported per strategy: the share
of worlds in which it ranks first, its median speedup over tune-default (median time to target)
and its worst speedup over the worlds. World w's factors depend only on (sensitivity.seed, w),
so any world can be re-run alone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from hetune.sim.engine import simulate
from hetune.sim.loader import RunInputs, load_inputs
from hetune.sim.results import run_summary
from hetune.sim.standings import OBJECTIVES
from hetune.sim.summary import ttt_sort_key


@dataclass(frozen=True)
class WorldCell:
    """One simulation of a sensitivity sweep: a strategy and seed in perturbed world ``world``."""

    experiment: str
    overrides: tuple[str, ...]
    strategy: str
    seed: int
    world: int


def draw_world(inputs: RunInputs, world: int) -> dict[str, Any]:
    """The factors of perturbed world ``world`` (deterministic in sensitivity.seed and ``world``)."""
    ranges = inputs.experiment.sensitivity
    rng = np.random.default_rng([ranges.seed, world])

    def factor(r: tuple[float, ...]) -> float:
        return float(math.exp(rng.uniform(math.log(r[0]), math.log(r[1]))))

    devices = sorted(inputs.cluster.devices)
    return {"step_time": {d: factor(ranges.step_time) for d in devices},
            "overheads": {d: factor(ranges.overheads) for d in devices},
            **{k: factor(getattr(ranges, k)) for k in ("scaling", "lr_opt", "width_decades", "tau_iterations",
                                                       "noise_std", "noise_batch")},
            # drawn after the others, so that adding them left every earlier world's factors as they were
            **{k: factor(getattr(ranges, k)) for k in ("nqm_noise", "nqm_curvature_min", "nqm_curvature_max",
                                                       "nqm_loss_half")}}


def perturb(inputs: RunInputs, f: dict[str, Any]) -> RunInputs:
    """``inputs`` with the calibration, cluster links and surrogate multiplied by world factors ``f``."""
    s = f["scaling"]
    models: dict[str, dict[str, Any]] = {}
    for model, rows in inputs.calibration.models.items():
        models[model] = {}
        for d, dm in rows.items():
            st, oh = f["step_time"].get(d, 1.0), f["overheads"].get(d, 1.0)
            models[model][d] = dataclasses.replace(
                dm, alpha_s=dm.alpha_s * st, beta_s_per_sample=dm.beta_s_per_sample * st,
                eval_s=dm.eval_s * oh, save_s=dm.save_s * oh, load_s=dm.load_s * oh,
                start_overhead_s=dm.start_overhead_s * oh, resume_s=dm.resume_s * oh,
                parallel_fraction=dm.parallel_fraction * s,
                parallel_fraction_batch={b: v * s for b, v in dm.parallel_fraction_batch.items()},
                speedup={n: 1.0 + (v - 1.0) * s for n, v in dm.speedup.items()})
    devices = {d: dataclasses.replace(t, link_gbps=t.link_gbps * s) for d, t in inputs.cluster.devices.items()}

    def curve(p):
        return dataclasses.replace(p, lr_opt=p.lr_opt * f["lr_opt"], width_decades=p.width_decades * f["width_decades"],
                                   tau_iterations=p.tau_iterations * f["tau_iterations"],
                                   noise_std=p.noise_std * f["noise_std"], noise_batch=p.noise_batch * f["noise_batch"])

    calibration = dataclasses.replace(inputs.calibration, models=models,
                                      curves={m: curve(p) for m, p in inputs.calibration.curves.items()})
    q = inputs.experiment.learning.nqm
    nqm = dataclasses.replace(q, noise=q.noise * f["nqm_noise"], noise_std=q.noise_std * f["noise_std"],
                              curvature_min=q.curvature_min * f["nqm_curvature_min"],
                              curvature_max=q.curvature_max * f["nqm_curvature_max"],
                              loss_half=q.loss_half * f["nqm_loss_half"])
    if nqm.curvature_min > nqm.curvature_max:  # a world may not invert the spectrum
        nqm = dataclasses.replace(nqm, curvature_min=nqm.curvature_max)
    experiment = dataclasses.replace(inputs.experiment, surrogate=curve(inputs.experiment.surrogate),
                                     learning=dataclasses.replace(inputs.experiment.learning, nqm=nqm))
    return dataclasses.replace(inputs, experiment=experiment, calibration=calibration,
                               cluster=dataclasses.replace(inputs.cluster, devices=devices))


@functools.lru_cache(maxsize=4)
def _inputs(experiment: str, overrides: tuple[str, ...]) -> RunInputs:
    return load_inputs(experiment, list(overrides))  # once per process, not once per cell


def run_world_cell(cell: WorldCell) -> dict[str, Any]:
    """Simulate one cell in its world; the summary row with the world's index (a worker process or Ray task)."""
    base = _inputs(cell.experiment, cell.overrides)
    inputs = perturb(base, draw_world(base, cell.world))
    row = run_summary(inputs, simulate(inputs, inputs.make_strategy(cell.strategy), cell.seed).events,
                      cell.strategy, cell.seed)
    row["world"] = cell.world
    return row


def robustness(rows: Sequence[dict[str, Any]], objective: str, baseline: str = "tune-default") -> list[dict[str, Any]]:
    """Per strategy: worlds, share of worlds it ranks first in, median and worst speedup over ``baseline``.

    A world where no strategy's median run reaches a finite score (e.g. none reaches the target)
    has no first: it counts for nobody (each entry reports ``worlds_without_winner``), never for
    the alphabetically first name. Strategies tied on the best score share the world equally.

    Args:
        rows: rows of run_world_cell.
        objective: a key of standings.OBJECTIVES.
        baseline: the strategy speedups are relative to.
    """
    larger = OBJECTIVES[objective][1]
    metric = {"time_to_target": "time_to_target_s", "makespan": "makespan_s", "cost": "cost",
              "best_accuracy_at_budget": "best_accuracy_at_budget"}[objective]

    def value(r: dict[str, Any]) -> float:
        v = r.get(metric)
        if metric == "time_to_target_s":
            return ttt_sort_key(v)
        return (-math.inf if larger else math.inf) if v is None else float(v)

    cells: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        cells.setdefault(int(r["world"]), {}).setdefault(r["strategy"], []).append(r)
    names = sorted({r["strategy"] for r in rows})
    first = {n: 0.0 for n in names}
    no_winner = 0
    speedups: dict[str, list[float]] = {n: [] for n in names}
    for world in cells.values():
        score = {n: float(np.median([value(r) for r in rs])) for n, rs in world.items()}
        top = (max if larger else min)(score.values())
        if math.isfinite(top):
            winners = [n for n, v in score.items() if v == top]
            for n in winners:
                first[n] += 1.0 / len(winners)
        else:
            no_winner += 1
        if baseline in world:
            b = float(np.median([ttt_sort_key(r["time_to_target_s"]) for r in world[baseline]]))
            for n, rs in world.items():
                t = float(np.median([ttt_sort_key(r["time_to_target_s"]) for r in rs]))
                speedups[n].append(b / t if math.isfinite(b) and math.isfinite(t)
                                   else (0.0 if math.isfinite(b) else math.nan))
    out = []
    for n in names:
        sp = [v for v in speedups[n] if not math.isnan(v)]
        out.append({"strategy": n, "worlds": len(cells), "first_share": first[n] / max(1, len(cells)),
                    "worlds_without_winner": no_winner,
                    "speedup_median": float(np.median(sp)) if sp else None,
                    "speedup_worst": float(min(sp)) if sp else None})
    out.sort(key=lambda e: (-e["first_share"], -(e["speedup_median"] or 0.0), e["strategy"]))
    return out


def format_robustness(rob: list[dict[str, Any]], objective: str) -> str:
    """The robustness table as plain text."""
    head = f"{'strategy':<26}{'worlds':>7}{'first in':>10}  {'speedup median':>15}{'worst':>9}"
    lines = [f"ranked by {objective.replace('_', ' ')} in each perturbed world", head, "-" * len(head)]
    for e in rob:
        med = "-" if e["speedup_median"] is None else f"{e['speedup_median']:.2f}x"
        worst = "-" if e["speedup_worst"] is None else f"{e['speedup_worst']:.2f}x"
        lines.append(f"{e['strategy']:<26}{e['worlds']:>7}{e['first_share']:>9.0%}  {med:>15}{worst:>9}")
    if rob and rob[0].get("worlds_without_winner"):
        lines.append(f"no strategy's median run reached a score in {rob[0]['worlds_without_winner']} of "
                     f"{rob[0]['worlds']} worlds (first in none of them)")
    return "\n".join(lines)


def run_sensitivity(experiment: str, overrides: list[str], strategies: list[str], seeds: Sequence[int],
                    worlds: int, out_dir: Any, executor: Any, resume: bool = False,
                    progress: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run (or finish) a sensitivity sweep; write sensitivity.csv and robustness.json into ``out_dir``.

    Args:
        experiment: experiment file.
        overrides: ``--set`` strings.
        strategies: strategy names.
        seeds: seeds per world.
        worlds: perturbed worlds (numbered 1..worlds).
        out_dir: the folder (a Path).
        executor: where cells run (sweep.LocalExecutor or real.ray_executor.RayExecutor).
        resume: keep the finished cells of ``out_dir``'s sensitivity.csv and run the rest.
        progress: called with (done, total) after each cell.

    Returns:
        (rows, robustness table).
    """
    from hetune.sim.schema import to_mapping
    from hetune.sim.sweep import read_csv, write_csv
    from hetune.sim.tomlfile import atomic_write_json

    inputs = load_inputs(experiment, overrides)
    for s in strategies:
        inputs.strategy_params(s)  # refuse bad parameters before anything runs
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "sensitivity.csv"
    rows = [r for r in read_csv(csv_path) if r["strategy"] in strategies] if resume and csv_path.exists() else []
    done = {(r["strategy"], int(r["seed"]), int(r["world"])) for r in rows}
    cells = [WorldCell(experiment, tuple(overrides), s, seed, w) for w in range(1, worlds + 1)
             for s in strategies for seed in seeds if (s, seed, w) not in done]
    total = len(done) + len(cells)
    for row in executor.map_unordered(run_world_cell, cells):
        row.pop("experiment", None)
        rows.append(row)
        if len(rows) % 50 == 0 or len(rows) == total:  # rewriting a large CSV per cell would dominate
            write_csv(csv_path, rows)
        if progress:
            progress(len(rows), total)
    write_csv(csv_path, rows)
    objective = inputs.experiment.experiment.objective
    rob = robustness(rows, objective)
    atomic_write_json(out_dir / "robustness.json", {
        "experiment": inputs.experiment.experiment.name, "objective": objective, "worlds": worlds,
        "seeds": len(seeds), "ranges": to_mapping(inputs.experiment.sensitivity), "strategies": rob})
    return rows, rob
