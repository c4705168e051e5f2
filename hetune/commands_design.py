"""``hetune calibrate curves --design EXPERIMENT --out FOLDER``: plan the runs that identify the skills
learning model (calibrate/curve_design.py), say what they cost against the PBT run they plan, train them
for real through Ray (real/design_runs.py; resumable), and fit them into ``FOLDER/learning.toml``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hetune.sim.errors import ConfigError


def cmd_design(args: argparse.Namespace) -> int:
    from hetune.calibrate.curve_design import cost_lines, finished, open_design, plan
    from hetune.sim.loader import load_inputs

    inputs = load_inputs(args.design, args.overrides)
    design = plan(args.design, inputs, args.seeds)
    for line in cost_lines(design, inputs):
        print(line)
    if args.plan_only:
        for r in design.runs:
            print(f"  {r.name}: " + ", ".join(f"lr {lr:.3g} m {m:g} to {end}" for lr, m, end in r.segments))
        return 0
    if args.workers < 1:
        raise ConfigError("--workers", "", f"must be >= 1, got {args.workers}")
    folder = Path(args.out)
    data = _data(inputs, folder, args.data_dir)  # refused before anything is written
    design = open_design(folder, design)
    done = len(finished(folder))
    if done:
        print(f"{done} of {len(design.runs)} runs already in {folder}: resuming")
    if data == str(folder / "data"):
        from hetune.real.cifar import FOLDERS
        from hetune.real.digits import write_digits

        if not (folder / "data" / FOLDERS["digits"]).is_dir():
            write_digits(data)
    from dataclasses import asdict

    from hetune.real.design_runs import run_design

    have = finished(folder)
    todo = [{"name": r.name, "seed": r.seed, "segments": [list(s) for s in r.segments]}
            for r in design.runs if r.name not in have]
    spec = {k: v for k, v in asdict(design).items() if k != "runs"}
    from hetune.sim.enums import DeviceKind

    gpus = 1.0 if inputs.cluster.has_kind(DeviceKind.GPU) else 0.0  # a GPU experiment's runs train on a GPU
    run_design(folder, spec, todo, data, args.workers, args.address, args.quiet, gpus)
    return _fit(folder, design.eval_samples)


def _data(inputs: Any, folder: Path, data_dir: str) -> str:
    exp = inputs.experiment
    if not exp.experiment.dataset:
        raise ConfigError(inputs.source, "experiment.dataset", "the design trains the network: name its dataset")
    if exp.experiment.dataset == "digits":  # shipped: written into the design folder unless a folder is named
        return data_dir or exp.real.data_dir or str(folder / "data")
    data = data_dir or exp.real.data_dir
    if not data:
        raise ConfigError("--data-dir", "", "name the folder holding the CIFAR python folders")
    from hetune.real.cifar import load_cifar

    load_cifar(data, exp.experiment.dataset, "test", limit=1)  # a missing folder refused before Ray starts
    return data


def _fit(folder: Path, eval_samples: int) -> int:
    from hetune.calibrate.skills_curves import describe, write_fit
    from hetune.calibrate.skills_fit import FitSettings
    from hetune.sim.skills import SkillsParams

    out = folder / "learning.toml"
    r = write_fit([str(folder)], out, SkillsParams(hard_after_easy=True), FitSettings(eval_samples=eval_samples))
    print(f"skills fitted to the design's {r.runs} runs -> {out}")
    for line in describe(r):
        print(f"  {line}")
    return 0
