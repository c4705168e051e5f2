"""``hetune calibrate curves --design``: the real runs that identify the skills learning model, planned
from an experiment, priced before they start, and read back as curves.

The design (issue "A learning model fitted to real training", item 2; results/skills-digits/ shows why
each part is there): over the experiment's horizon (``stop_iterations``) at its batch, model and data,
- constant learning rates at the bottom, the geometric middle and the top of the search space (the
  lr-dependent powers and the temperature need three);
- the top lr dropped 10x at 1/3 and, separately, at 2/3 of the horizon (one drop does not identify the
  floor against the skills: both are needed);
- one raise, from the bottom lr to the top one at 1/3 (what a PBT explore up does);
each at ``seeds`` seeds (3 by default: the runs of one seed share its data order, the reading noise
every trial of a real PBT run shares). Momentum is the search space's middle value (the runs cannot
test the lr / (1 - momentum) assumption; docs/learning.md). Readings every ``checkpoint_interval``.

A design folder holds ``design.json`` (the plan, frozen when the folder is made) and ``runs/<name>.json``,
one per finished run (written whole, so an interrupted design resumes without redoing one).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetune.calibrate.skills_fit import Curve
from hetune.sim.errors import ConfigError

MIN_LRS = 3  # the lr-dependent parameters (two powers and a temperature) need three distinct learning rates


@dataclass(frozen=True)
class DesignRun:
    """One run of the design: its name, seed and lr segments (lr, momentum, last iteration)."""

    name: str
    seed: int
    segments: tuple[tuple[float, float, int], ...]


@dataclass(frozen=True)
class Design:
    """A design: what every run trains, how often it is read, and the runs."""

    experiment: str
    model: str
    dataset: str
    stem: str
    batch: int
    horizon: int
    every: int
    eval_samples: int
    runs: tuple[DesignRun, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Design":
        runs = tuple(DesignRun(r["name"], int(r["seed"]),
                               tuple((float(a), float(b), int(c)) for a, b, c in r["segments"])) for r in d["runs"])
        return Design(**{**d, "runs": runs})


def search_lrs(inputs: Any, where: str) -> list[float]:
    """Bottom, geometric middle and top of the experiment's lr search space (a choice's three spread
    values); ConfigError where it has fewer than MIN_LRS learning rates."""
    mut = inputs.experiment.pbt.mutations.get("lr")
    if mut is None:
        raise ConfigError(where, "pbt.mutations.lr", "the design spans the lr search space: the experiment has none")
    if mut.kind == "choice":
        vals = sorted({float(v) for v in mut.values})
        if len(vals) < MIN_LRS:
            raise ConfigError(where, "pbt.mutations.lr.values",
                              f"{len(vals)} learning rate(s) ({', '.join(f'{v:g}' for v in vals)}): the skills model "
                              f"needs runs at {MIN_LRS} or more")
        return [vals[0], vals[len(vals) // 2], vals[-1]]
    lo, hi = float(mut.low), float(mut.high)
    if not 0 < lo < hi:
        raise ConfigError(where, "pbt.mutations.lr", f"needs 0 < low < high for the design's three learning rates, got "
                                                     f"{lo:g} and {hi:g}")
    return [lo, math.sqrt(lo * hi), hi]


def plan(experiment: str, inputs: Any, seeds: int) -> Design:
    """The design for ``inputs`` (an experiment's RunInputs) at seeds 0..seeds-1 (see the module docstring)."""
    if seeds < 1:
        raise ConfigError("--seeds", "", f"must be >= 1, got {seeds}")
    exp = inputs.experiment.experiment
    low, mid, top = search_lrs(inputs, experiment)
    mom = inputs.experiment.pbt.mutations.get("momentum")
    m = float(sorted(mom.values)[len(mom.values) // 2]) if mom is not None and mom.kind == "choice" else \
        float(math.sqrt(mom.low * mom.high)) if mom is not None and mom.low > 0 else 0.9
    h = int(exp.stop_iterations)
    if h < 6:
        raise ConfigError(experiment, "experiment.stop_iterations", f"the design drops at 1/3 and 2/3 of the horizon: "
                                                                   f"needs at least 6 iterations, got {h}")
    third, two = max(1, round(h / 3)), max(2, round(2 * h / 3))
    Segs = tuple[tuple[float, float, int], ...]
    shapes: list[tuple[str, Segs]] = [(f"const-lr{lr:.3g}", ((lr, m, h),)) for lr in (low, mid, top)]
    shapes += [(f"drop-lr{top:.3g}-at{at}", ((top, m, at), (top / 10, m, h))) for at in (third, two)]
    shapes += [(f"raise-lr{low:.3g}-at{third}", ((low, m, third), (top, m, h)))]
    runs = tuple(DesignRun(f"{name}-s{s}", s, segs) for s in range(seeds) for name, segs in shapes)
    return Design(experiment, exp.model, exp.dataset, exp.stem, int(exp.batch_size), h,
                  max(1, int(exp.checkpoint_interval)), int(exp.eval_samples), runs)


def cost_lines(design: Design, inputs: Any) -> list[str]:
    """What the design costs in device time, and against the PBT run it plans, from the calibration's step
    times on the cluster's fastest device type (evaluations not counted)."""
    exp = inputs.experiment.experiment
    step = inputs.calibration.step_time_fn(exp.model, exp.batch_size, inputs.cluster, "calibration")
    devices = sorted(inputs.cluster.devices)
    times = {}
    for d in devices:
        try:
            times[d] = step(d, 1)
        except ConfigError:
            continue
    trial_its = len(design.runs) * design.horizon
    pbt_its = exp.population * exp.stop_iterations
    lines = [f"design: {len(design.runs)} runs x {design.horizon} iterations = {trial_its:,} trial-iterations; the PBT "
             f"run it plans trains {exp.population} trials x {exp.stop_iterations} = {pbt_its:,} "
             f"({trial_its / pbt_its:.1f}x as many)"]
    if times:
        dev = min(times, key=lambda d: times[d])
        lines.append(f"about {trial_its * times[dev] / 3600:.2f} device-hours on {dev} ({times[dev]:.3g} s per "
                     f"iteration, the calibration's); the PBT run {pbt_its * times[dev] / 3600:.2f}")
    else:
        lines.append("no step time for this model and batch in the calibration: cost in device time unknown")
    return lines


def open_design(folder: Path, design: Design) -> Design:
    """The folder's frozen design: written now if the folder is new; refused if it holds another design."""
    path = folder / "design.json"
    if path.is_file():
        try:
            have = Design.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(str(path), "", f"not a design file: {exc}") from None
        if have.runs != design.runs or (have.horizon, have.batch, have.every) != (design.horizon, design.batch,
                                                                                    design.every):
            raise ConfigError(str(folder), "", "holds another design (a different experiment or --seeds); name "
                                               "another --out, or remove it")
        return have
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(design.to_json(), indent=1) + "\n")
    tmp.replace(path)
    return design


def finished(folder: Path) -> set[str]:
    return {p.stem for p in (folder / "runs").glob("*.json")}


def design_curves(folder: Path) -> list[Curve]:
    """The finished runs of a design folder as curves (batch and segments from design.json)."""
    try:
        design = Design.from_json(json.loads((folder / "design.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(str(folder / "design.json"), "", f"cannot read the design: {exc}") from None
    out = []
    for run in design.runs:
        p = folder / "runs" / f"{run.name}.json"
        if p.is_file():
            readings = tuple((int(i), float(a)) for i, a, *_ in json.loads(p.read_text())["readings"])
            out.append(Curve(run.name, run.seed, run.segments, readings, design.batch))
    return out
