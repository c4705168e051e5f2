"""Subcommands that measure or run for real (torch, Ray): calibrate, calibrate curves, validate, compare."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hetune.common import (add_force_option, add_set_option, add_size_option, int_list, positive, require_torch,
                           progress_bar, shipped)
from hetune.sim.outdir import claim_file, claim_folder
from hetune.sim.errors import ConfigError


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure step times through Ray, fit them and write a calibration TOML."""

    from hetune.calibrate.runner import CalibrateRequest, run_calibration

    claim_file(Path(args.out), keep=args.merge or args.resume, force=args.force, keep_flags="--resume or --merge")
    req = CalibrateRequest(cluster=args.cluster, models=[m.strip() for m in args.models.split(",") if m.strip()],
                           batch_sizes=args.batch_sizes, steps=args.steps, out=args.out, warmup=args.warmup,
                           repeat=args.repeat, holdout=args.holdout, merge=args.merge, resume=args.resume,
                           address=args.address, data_dir=args.data_dir, stem=args.stem,
                           devices=[d for d in args.devices.split(",") if d], overheads=not args.skip_overheads,
                           under_load=args.under_load, storage=args.storage, shared_storage=args.shared_storage)
    bars: list[Any] = []  # made on the first cell, so bad input prints only its error line

    def progress(desc: str, done: int, total: int) -> None:
        if not bars:
            bars.append(progress_bar(args.quiet, total=total, unit="cell"))
        bars[0].n = done
        bars[0].set_description(desc)
        bars[0].refresh()

    result = run_calibration(req, report=lambda line: print(line, file=sys.stderr), progress=progress)
    for b in bars:
        b.close()
    for (model, device), (fit, pts) in sorted(result["fits"].items()):
        print(f"{model:<9} on {device:<10} step_time_s = {fit.alpha_s:.4f} + {fit.beta_s_per_sample:.6f} x batch  "
              f"(R^2 {fit.r2:.3f}, largest residual {fit.max_rel_residual:.1%}, {len(pts)} batch sizes)")
    for w in result["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    for h in result["holdout"]:
        print(f"held-out {h['model']} on {h['device']} batch {h['batch']}: measured {h['measured_s']:.4f} s, "
              f"predicted {h['predicted_s']:.4f} s, error {h['error']:+.1%}")
    for sp in result["spread"]:
        print(f"repeat spread {sp['model']} on {sp['device']} batch {sp['batch']}: {sp['spread']:.1%}")
    for f in result["failed"]:
        print(f"failed cell {f.model} on {f.device} batch {f.batch}: {f.reason}", file=sys.stderr)
    print(f"wrote {args.out}")
    return 1 if result["missing"] and not result["fits"] else 0


def cmd_curves(args: argparse.Namespace) -> int:
    """Fit a learning model to recorded runs: the bell curve (default) or the noisy quadratic model."""
    from hetune.calibrate.curves import write_curves

    if args.design:
        from hetune.commands_design import cmd_design

        return cmd_design(args)
    if not args.events:
        raise ConfigError("calibrate curves", "", "name the recorded runs to fit (or --design EXPERIMENT to run them)")
    claim_file(Path(args.out), force=args.force, keep_flags="")
    if args.kind == "nqm":
        return _curves_nqm(args)
    if args.kind == "skills":
        return _curves_skills(args)
    from hetune.calibrate.curves import describe

    params, stats = write_curves(args.events, Path(args.out), args.model, args.dataset,
                                 Path(args.calibration) if args.calibration else None)
    print(f"{args.model}: max_accuracy {params.max_accuracy:.3f}, tau {params.tau_iterations:.1f} iterations, "
          f"shape {params.shape:.3g}, "
          f"lr_opt {params.lr_opt:.4g}, width {params.width_decades:.3g} decades, noise {params.noise_std:.3f} "
          f"(RMSE {stats['rmse']:.4f} over {stats['points']} accuracies) -> {args.out}")
    for line in describe(params, stats):
        print(f"  {line}")
    return 0


def cmd_spread(args: argparse.Namespace) -> int:
    """Measure how much a device type's seconds vary (recorded runs, other calibrations) into a calibration."""
    from hetune.calibrate.spread import write_spread

    claim_file(Path(args.out), force=args.force, keep_flags="")
    got = write_spread(Path(args.calibration), args.runs, [Path(p) for p in args.drift], args.model, Path(args.out))
    for device, m in sorted(got["runs"].items()):
        steps = ", ".join(f"batch {b}: {v:.1%}" for b, v in sorted(m.get("step_cv_batch", {}).items(),
                                                                     key=lambda kv: int(kv[0])))
        print(f"{device}: chunk spread {steps or 'not measured'} ({m.get('chunks', 0)} chunks); overhead spread "
              + (f"{m['overhead_cv']:.1%} ({m['overheads']} saves and restores)" if "overhead_cv" in m
                 else "not measured"))
    for device, cv in sorted(got["drift"].items()):
        print(f"{device}: drift between {len(args.drift) + 1} calibrations {cv:.1%}")
    print(f"wrote {args.out}")
    return 0


def _curves_skills(args: argparse.Namespace) -> int:
    from hetune.calibrate.skills_curves import describe, write_fit
    from hetune.sim.skills import SkillsParams

    if not args.accuracy_scale > 0:
        raise ConfigError("--accuracy-scale", "", f"must be > 0, got {args.accuracy_scale}")
    # the form frozen after the digits hold-out (results/skills-digits/: the hard skill learned on top of the
    # easy one; the only form whose fit of the whole digits design identifies every parameter)
    r = write_fit(args.events, Path(args.out), SkillsParams(hard_after_easy=True), metric=args.metric,
                  loss_metric=args.loss_metric, batch=args.batch_size, momentum=args.momentum,
                  scale=args.accuracy_scale)
    print(f"skills fitted to {r.runs} curves -> {args.out}")
    for line in describe(r):
        print(f"  {line}")
    return 0


def _curves_nqm(args: argparse.Namespace) -> int:
    from hetune.calibrate.nqm_curves import describe, write_fit
    from hetune.sim.loader import load_inputs

    inputs = load_inputs(args.experiment, args.overrides)
    info = inputs.experiment.experiment
    prior = replace(inputs.experiment.learning.nqm, chance_accuracy=1.0 / info.num_classes)
    fit = write_fit(args.events, Path(args.out), prior, args.eval_samples or info.eval_samples, args.metric,
                    args.loss_metric, args.batch_size, args.momentum, use_loss=not args.no_loss)
    d = fit["design"]
    print(f"nqm fitted to {d['trials']} trials ({d['accuracies']} accuracies, {d['losses']} losses; learning rates "
          f"{', '.join(f'{v:g}' for v in d['lrs'])}; batch {', '.join(map(str, d['batches']))}) -> {args.out}")
    for line in describe(fit):
        print(f"  {line}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Run a strategy as a real Ray Tune PBT run (optionally repeated) and record it as events."""
    from hetune.real.validate import run_validate

    from hetune.real.repeat import summarize_repeats
    from hetune.sim.loader import load_inputs
    from hetune.sim.size import check_size

    positive(args.repeat, "--repeat")
    if args.seed is not None and args.seed < 0:
        raise ConfigError("--seed", "", f"must be >= 0, got {args.seed}")
    out = Path(args.out)
    # bad input (and a population too large to handle) is refused before anything is moved aside
    inputs = load_inputs(args.experiment, args.overrides)
    check_size(inputs, args.max_events)
    if inputs.experiment.real.trainable == "network":  # the model trainable needs no torch
        require_torch("validate")
    claim_folder(out, resume=args.resume, force=args.force)
    runs = []
    for r in range(args.repeat):
        run_out = out if args.repeat == 1 else out / f"repeat-{r}"
        seed = (args.seed or 0) + r if args.repeat > 1 else args.seed
        summary = run_validate(args.experiment, args.overrides, args.strategy, run_out, data_dir=args.data_dir,
                               seed=seed, report_interval_s=args.report_interval, address=args.address,
                               quiet=args.quiet, resume=args.resume, plain=args.plain)
        ttt = summary["time_to_target_s"]
        print(f"real run ({summary['strategy']}, seed {summary['seed']}): time to target "
              f"{'never' if ttt is None else f'{ttt:,.0f} s'}, makespan {summary['makespan_s']:,.0f} s, "
              f"best accuracy {summary['best_accuracy']:.3f}, exploits {summary['exploits']} -> {run_out}")
        runs.append(summary)
    if args.repeat > 1:
        rep = summarize_repeats(runs, out / "repeats.json")
        print(f"{args.repeat} repeats: runtime {rep['makespan_s']['mean']:,.1f} +/- {rep['makespan_s']['std']:,.1f} s, "
              f"best accuracy {rep['best_accuracy']['mean']:.3f} +/- {rep['best_accuracy']['std']:.3f}")
    return 0


def cmd_slots(args: argparse.Namespace) -> int:
    """Print, per node of the experiment's cluster, the `ray start` resources its strategy's workers need."""
    import json

    from hetune.real.strategy_scheduler import node_resources
    from hetune.real.validate import strategy_workers
    from hetune.sim.loader import load_inputs

    inputs = load_inputs(args.experiment, args.overrides)
    workers, _, strategy = strategy_workers(inputs, args.strategy)
    slots = node_resources(workers)
    for node, res in sorted(slots.items()):
        print(f"{node}: ray start --address=HEAD:6379 --resources='{json.dumps(res)}'")
    print(f"{strategy.name}: {len(workers)} worker slot(s) on {len(slots)} node(s)")
    return 0


def cmd_cluster_describe(args: argparse.Namespace) -> int:
    """Write the cluster file of the running Ray cluster at --address."""
    from hetune.real.describe import describe
    from hetune.real.ray_init import init_ray
    from hetune.sim.cluster import load_cluster
    from hetune.sim.tomlfile import atomic_write_toml

    out = Path(args.out)
    claim_file(out, force=args.force, keep_flags="")  # refused before joining Ray
    ray = init_ray(args.address)
    try:
        nodes = ray.nodes()
    finally:
        ray.shutdown()
    try:
        data, header = describe(nodes, args.name or out.stem)
    except ValueError as exc:
        raise ConfigError("--address", "", f"{args.address}: {exc}") from None
    atomic_write_toml(out, data, header=header)
    cluster = load_cluster(out)  # what calibrate and sweep will read: refused here if it would be there
    kinds = ", ".join(f"{d} ({v.kind})" for d, v in sorted(cluster.devices.items()))
    print(f"{len(cluster.nodes)} node group(s), device types {kinds} -> {out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare a recorded real run with the simulator's prediction of it; writes fidelity.json."""
    from hetune.real.compare import compare, format_fidelity

    print(format_fidelity(compare(Path(args.run), args.overrides, args.seeds)))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add calibrate, calibrate-curves, validate, slots, cluster describe and compare to the parser."""
    _register_calibrate(sub)
    _register_validate(sub)
    _register_cluster(sub)


def _register_calibrate(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """calibrate and calibrate-curves: what measures the machines and the learning."""
    p = sub.add_parser("calibrate", help="measure step times through Ray and fit the simulator's models")
    p.add_argument("--cluster", default=str(shipped("clusters/local.toml")),
                   help="cluster config naming the device types")
    p.add_argument("--models", default="resnet18", help="comma-separated: resnet18 (CIFAR-10), resnet50 (CIFAR-100)")
    p.add_argument("--batch-sizes", type=int_list, default=[32, 64, 128, 256])
    p.add_argument("--holdout", type=int_list, default=[], help="batch sizes measured only to check the fit")
    p.add_argument("--steps", type=int, default=20, help="timed steps per cell")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per cell")
    p.add_argument("--repeat", type=int, default=1, help="repeats per cell; the spread is reported")
    p.add_argument("--devices", default="", help="only these device types (comma-separated)")
    p.add_argument("--out", required=True, help="calibration TOML to write")
    p.add_argument("--merge", action="store_true", help="keep the other device types already in --out")
    p.add_argument("--resume", action="store_true", help="skip cells already in --out")
    add_force_option(p, "calibration file")
    p.add_argument("--address", default="", help="existing Ray cluster (auto or ray://host:port); default: local")
    p.add_argument("--data-dir", default="", help="folder with the CIFAR python folders; default: synthetic batches")
    p.add_argument("--stem", default="cifar", help="the network: cifar (3x3 stem, no pool; the default) or imagenet "
                   "(torchvision as is); an experiment uses rows of its experiment.stem only")
    p.add_argument("--under-load", action="store_true",
                   help="time each cell while the cluster's other worker slots train (an emulated cluster on this "
                        "host, whose device types share its cores)")
    p.add_argument("--storage", default="", help="also time checkpoint transfers to this storage (a path, or a URI "
                   "such as s3://bucket/prefix?endpoint_override=host:port&scheme=http): the file's [storage]")
    p.add_argument("--shared-storage", action="store_true", help="--storage is a file system every node mounts")
    p.add_argument("--skip-overheads", action="store_true",
                   help="skip the Ray Tune probe of trial start, pause/resume, save and restore per device type")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_calibrate, needs_torch=True)

    p = sub.add_parser("calibrate-curves", help="fit the learning-curve surrogate to recorded runs "
                                                "(also: hetune calibrate curves ...)")
    p.add_argument("events", nargs="*", help="events.jsonl files or run folders of real runs")
    p.add_argument("--out", required=True, help="calibration file to write (the base plus [curves.<model>]); "
                                                "with --design, the design folder")
    add_force_option(p, "calibration file")
    p.add_argument("--calibration", default="", help="base calibration (default: the run folder's)")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100"])
    p.add_argument("--kind", default="bell", choices=["bell", "nqm", "skills"],
                   help="bell: the curve surrogate into a calibration file; nqm or skills: that learning model into a "
                        "learning file ([learning] path), from run folders, events or Ray Tune experiment folders "
                        "(skills also: long learning-curve CSVs and digits runs.json; docs/learning.md)")
    p.add_argument("--accuracy-scale", type=float, default=1.0,
                   help="skills: divide every reading by this (a metric reported in percent: 100)")
    p.add_argument("--experiment", default=str(shipped("experiments/pbt-resnet18-cifar10.toml")),
                   help="nqm: the experiment whose [learning.nqm] is the prior (start, and kept where the data "
                        "do not identify a parameter) and whose dataset sets chance")
    add_set_option(p)
    p.add_argument("--metric", default="accuracy", help="nqm, Ray Tune folders: the accuracy key of the results")
    p.add_argument("--loss-metric", default="loss", help="nqm, Ray Tune folders: the training-loss key")
    p.add_argument("--no-loss", action="store_true", help="nqm: fit accuracies only")
    p.add_argument("--batch-size", type=int, default=None, help="nqm: the global batch where runs do not record it")
    p.add_argument("--momentum", type=float, default=None,
                   help="nqm: the SGD momentum where configs do not hold one")
    p.add_argument("--eval-samples", type=int, default=0,
                   help="nqm: test images per evaluation in the runs (default: the experiment's)")
    p.add_argument("--design", default="", metavar="EXPERIMENT",
                   help="plan, price and run (through Ray; resumable) the real runs that identify the skills model "
                        "for this experiment, then fit them into --out/learning.toml (docs/learning.md)")
    p.add_argument("--seeds", type=int, default=3, help="--design: seeds per run shape")
    p.add_argument("--plan-only", action="store_true", help="--design: print the plan and its cost, run nothing")
    p.add_argument("--data-dir", default="", help="--design: folder holding the CIFAR python folders")
    p.add_argument("--workers", type=int, default=2, help="--design: runs at once on a local Ray (one CPU each)")
    p.add_argument("--address", default="", help="--design: run on this Ray cluster instead")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_curves)


    p = sub.add_parser("calibrate-spread", help="how much each device type's seconds vary, from recorded runs and "
                                                "repeated calibrations (also: hetune calibrate spread ...)")
    p.add_argument("calibration", help="the calibration to add the spreads to")
    p.add_argument("--runs", nargs="*", default=[], help="recorded run folders (not the runs you will judge)")
    p.add_argument("--drift", nargs="*", default=[], help="other calibrations of the same host, made at other times")
    p.add_argument("--model", default="resnet18", help="the model whose rows get the spreads")
    p.add_argument("--out", required=True, help="calibration file to write (the base plus the spreads)")
    add_force_option(p, "calibration file")
    p.set_defaults(fn=cmd_spread)


def _register_validate(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """validate: a strategy as a real Ray Tune run."""
    p = sub.add_parser("validate", help="run a strategy as a real Ray Tune PBT run, recorded as events")
    p.add_argument("experiment")
    p.add_argument("--strategy", default="best", help="a strategy, or best (the latest sweep's best)")
    p.add_argument("--out", required=True, help="result folder")
    p.add_argument("--data-dir", default="", help="folder holding the CIFAR python folders")
    p.add_argument("--seed", type=int)
    p.add_argument("--report-interval", type=float, default=300.0, help="seconds between status tables")
    p.add_argument("--address", default="", help="a Ray cluster; default: emulate the cluster config here")
    p.add_argument("--quiet", action="store_true", help="no status tables")
    p.add_argument("--repeat", type=int, default=1, help="run N times (seeds seed..seed+N-1); writes repeats.json")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (Tuner.restore)")
    p.add_argument("--plain", action="store_true",
                   help="tune-default only: Ray Tune's own PBT scheduling, no strategy adapter (the reference "
                        "for the simulator's model of Ray)")
    add_force_option(p, "run")
    add_size_option(p)
    add_set_option(p)
    p.set_defaults(fn=cmd_validate)  # torch only for real.trainable = "network" (cmd_validate checks)


def _register_cluster(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """slots, cluster describe and compare: a Ray cluster's resources and a recorded run's judgement."""
    p = sub.add_parser("slots", help="the `ray start --resources` each node needs for a strategy's workers")
    p.add_argument("experiment")
    p.add_argument("--strategy", default="tune-default")
    add_set_option(p)
    p.set_defaults(fn=cmd_slots)

    p = sub.add_parser("cluster", help="your own Ray cluster as a cluster file")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    c = csub.add_parser("describe", help="write the cluster file of a running Ray cluster (one device type "
                                         "per kind of node), ready for calibrate --cluster")
    c.add_argument("--address", required=True, help="the Ray cluster (host:port, or auto)")
    c.add_argument("--out", required=True, help="the cluster file to write")
    c.add_argument("--name", default="", help="the cluster's name (default: the file's stem)")
    add_force_option(c, "cluster file")
    c.set_defaults(fn=cmd_cluster_describe)

    p = sub.add_parser("compare", help="real run against the simulator's prediction of it")
    p.add_argument("run", help="a folder written by validate")
    p.add_argument("--seeds", type=int, default=200, help="simulated seeds behind the predicted median and 95%% range "
                                                           "(at least 39)")
    add_set_option(p)
    p.set_defaults(fn=cmd_compare)
