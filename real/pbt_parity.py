"""PBT parity: Ray's PopulationBasedTraining (under the stand-in controller) against the simulator's PBT.

Both engines run one experiment (the same learning model, cluster, timing inputs, and for each seed
the same initial configurations and trial streams); per run we keep what a PBT user looks at:

- ``iterations``: the training iteration of the first evaluation at or above the target (in clock
  order), ``inf`` when no trial reaches it;
- ``time_s``: when that evaluation happened, seconds (``inf`` when never);
- ``exploits``: exploits per trial;
- ``best``: the best final accuracy (each trial's last evaluation, the best of them);
- ``high_iterations``: as ``iterations`` for a target of 0.88 (HIGH_TARGET), which many runs never
  reach: ``never_high`` is the share of runs that do not;
- ``makespan_s``: when the last trial stopped, seconds (what restaging and pauses cost).

``compare`` tests, per metric, whether the two engines' samples share one distribution, with
permutation tests (sim/permutation.py: valid on discrete, tied data), and reports effect sizes beside
the p-values; ``bench/bench_pbt_parity.py`` applies Holm's correction across every test of a run.
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from hetune.sim import strategies
from hetune.sim.engine import simulate
from hetune.sim.loader import RunInputs
from hetune.sim.permutation import chi_square_test, ks_test, mean_test

METRICS = ("iterations", "time_s", "exploits", "best", "high_iterations", "makespan_s")
HIGH_TARGET = 0.88  # above what any constant configuration reaches at 1,000 iterations: many runs never do


@dataclass(frozen=True)
class Outcome:
    """One run's outcome (see the module docstring)."""

    iterations: float
    time_s: float
    exploits: float
    best: float
    high_iterations: float = math.inf
    makespan_s: float = math.nan  # when the last trial stopped (NaN in outcomes recorded without it)


def _first_reach(readings: Iterable[tuple[float, int, float]], target: float) -> tuple[float, float]:
    for t, iteration, acc in readings:
        if acc >= target:
            # milliseconds: the engines add the same seconds in different orders, and a KS test
            # would tell 6.053000001 from 6.053 (the events themselves are rounded to microseconds)
            return float(iteration), round(float(t), 3)
    return math.inf, math.inf


def sim_outcome(inputs: RunInputs, seed: int) -> Outcome:
    """The simulator's run of its model of plain Ray Tune PBT (the ``ray_native`` strategy) for ``seed``."""
    events = simulate(inputs, inputs.make_strategy(strategies.ray_native()), seed).events
    return events_outcome(events, inputs.experiment.experiment.target_accuracy, inputs.experiment.experiment.population)



def real_outcome(run: Path) -> Outcome:
    """The outcome of a recorded run folder (``hetune validate``'s events.jsonl, the simulator's format)."""
    from hetune.sim.events import read_events
    from hetune.sim.snapshot import load_snapshot

    inputs, _ = load_snapshot(run)
    info = inputs.experiment.experiment
    return events_outcome(read_events(run / "events.jsonl"), info.target_accuracy, info.population)


def events_outcome(events: Sequence[dict[str, Any]], target: float, population: int) -> Outcome:
    """A run's outcome from its events (simulated or recorded)."""
    # a chunk carries the trial's last evaluation: one that did not evaluate repeats an earlier reading
    readings = [(e["t"], e["iteration"], e["accuracy"]) for e in events
                if e["kind"] == "chunk" and e.get("accuracy") is not None]
    iterations, time_s = _first_reach(readings, target)
    exploits = sum(1 for e in events if e["kind"] == "exploit")
    best = max(e["accuracy"] for e in events if e["kind"] == "stop")
    makespan = max(float(e["t"]) for e in events if e["kind"] == "stop")
    return Outcome(iterations, time_s, exploits / population, best, _first_reach(readings, HIGH_TARGET)[0],
                   round(makespan, 3))


def standin_outcome(inputs: RunInputs, seed: int) -> Outcome:
    """Ray's PopulationBasedTraining under the stand-in controller (real/pbt_standin.py) for ``seed``."""
    from hetune.real.pbt_standin import run_standin

    info = inputs.experiment.experiment
    run = run_standin(inputs, seed)
    readings = [(t, n, a) for t, _, n, a in run.readings]
    iterations, time_s = _first_reach(readings, info.target_accuracy)
    return Outcome(iterations, time_s, run.exploits / info.population, max(run.final.values()),
                   _first_reach(readings, HIGH_TARGET)[0], round(run.makespan_s, 3))


@dataclass(frozen=True)
class MetricComparison:
    """One metric of one setting, both engines.

    Args:
        metric: one of METRICS (``never_high`` for the share of runs that never reach HIGH_TARGET).
        test: "ks" (KS distance, permutation), "chi2" (chi-square of the categories, permutation),
            "mean" (|difference of means|, permutation).
        statistic: the observed statistic.
        p_value: its permutation p-value (uncorrected).
        ray: Ray's summary (median of the reached runs for iterations and time, mean otherwise, share for never).
        sim: the simulator's, same summary.
        effect: sim minus Ray in the summary's units, or relative (``effect_pct``) for iterations and time.
        effect_pct: (sim - ray) / ray, percent, where a relative effect means something; else None.
        ray_mean: for iterations and time, the mean over the runs that reached the target (a median of
            values that come in steps of the evaluation interval jumps a whole step); else None.
        sim_mean: the simulator's, same.
    """

    metric: str
    test: str
    statistic: float
    p_value: float
    ray: float
    sim: float
    effect: float
    effect_pct: float | None
    ray_mean: float | None = None
    sim_mean: float | None = None


def _median_reached(xs: Sequence[float]) -> float:
    reached = [x for x in xs if math.isfinite(x)]
    return float(np.median(reached)) if reached else math.inf


def _mean_reached(xs: Sequence[float]) -> float | None:
    reached = [x for x in xs if math.isfinite(x)]
    return float(np.mean(reached)) if reached else None


def compare(ray: Sequence[Outcome], sim: Sequence[Outcome], permutations: int = 2000,
            seed: int = 0) -> list[MetricComparison]:
    """Tests and effect sizes for every metric (see MetricComparison)."""
    out: list[MetricComparison] = []

    def col(runs: Sequence[Outcome], name: str) -> list[float]:
        return [getattr(r, name) for r in runs]

    for i, name in enumerate(METRICS):
        a, b = col(ray, name), col(sim, name)
        if any(math.isnan(x) for x in a + b):
            continue  # not recorded by one engine (outcomes kept from before the metric existed)
        if name in ("iterations", "time_s", "high_iterations", "makespan_s"):
            summary_a, summary_b = _median_reached(a), _median_reached(b)
        else:
            summary_a, summary_b = float(np.mean(a)), float(np.mean(b))
        test = ks_test(a, b, permutations, seed + i)
        pct = None
        means: tuple[float | None, float | None] = (None, None)
        if name in ("iterations", "time_s", "high_iterations", "makespan_s"):
            means = (_mean_reached(a), _mean_reached(b))
            if math.isfinite(summary_a) and summary_a > 0:
                pct = 100.0 * (summary_b - summary_a) / summary_a
        out.append(MetricComparison(name, "ks", test.statistic, test.p_value, summary_a, summary_b,
                                    summary_b - summary_a, pct, *means))
    # iterations to target as categories ("never" one of them): the whole distribution, cell by cell
    cat = chi_square_test([str(x) for x in col(ray, "iterations")], [str(x) for x in col(sim, "iterations")],
                          permutations, seed + 10)
    out.append(MetricComparison("iterations", "chi2", cat.statistic, cat.p_value, math.nan, math.nan,
                                math.nan, None))
    never_a = [0.0 if math.isfinite(x) else 1.0 for x in col(ray, "high_iterations")]
    never_b = [0.0 if math.isfinite(x) else 1.0 for x in col(sim, "high_iterations")]
    nv = mean_test(never_a, never_b, permutations, seed + 11)
    out.append(MetricComparison("never_high", "mean", nv.statistic, nv.p_value, float(np.mean(never_a)),
                                float(np.mean(never_b)), float(np.mean(never_b) - np.mean(never_a)), None))
    return out


def as_row(setting: str, c: MetricComparison) -> dict[str, Any]:
    """One comparison as a flat dict (the benchmark's table row)."""
    return {"setting": setting, **asdict(c)}
