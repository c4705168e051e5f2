"""The ``hetune`` command: parse arguments, load config, call a library function."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from sim.errors import ConfigError

DEFAULT_EXPERIMENT = "configs/experiments/pbt-resnet18-cifar10.toml"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set cluster.path=configs/clusters/hrfs-lab.toml")


def cmd_strategies(args: argparse.Namespace) -> int:
    from sim import strategies

    for name in strategies.names():
        print(f"{name:<26}{strategies.REGISTRY[name].summary}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from sim.engine import simulate
    from sim.loader import load_inputs
    from sim.results import write_run

    inputs = load_inputs(args.experiment, args.overrides)
    strategy = args.strategy or inputs.experiment.strategy.name
    inputs.strategy_params(strategy)
    seed = inputs.experiment.experiment.seed if args.seed is None else args.seed
    out = Path(args.out or f"results/{inputs.experiment.experiment.name}-{strategy}-s{seed}")
    population = None
    if args.replay:
        from sim.events import read_events
        from sim.replay import ReplayPopulation
        population = ReplayPopulation(read_events(args.replay), args.replay)
    adapt = None
    if args.adapt_policy:
        from real.adapt_hook import PolicyHook
        adapt = PolicyHook(Path(args.adapt_policy))
    result = simulate(inputs, strategy, seed, population, adapt)
    summary = write_run(out, inputs, result.events, strategy, seed,
                        extra={"replay_of": str(Path(args.replay).resolve())} if args.replay else None)
    ttt = summary["time_to_target_s"]
    print(f"{strategy} seed {seed}: time to target {'never' if ttt is None else f'{ttt:,.0f} s'}, "
          f"makespan {summary['makespan_s']:,.0f} s, best accuracy {summary['best_accuracy']:.3f}, "
          f"exploits {summary['exploits']}, cost ${summary['cost']:.2f} -> {out}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from sim import strategies
    from sim.loader import load_inputs
    from sim.sweep import LocalExecutor, format_ranking, ranking, run_sweep

    if args.seeds < 1:
        raise ConfigError("--seeds", "", f"must be >= 1, got {args.seeds}")
    if args.jobs < 1:
        raise ConfigError("--jobs", "", f"must be >= 1, got {args.jobs}")
    names = strategies.names() if args.strategies == "all" else [s.strip() for s in args.strategies.split(",") if s.strip()]
    for n in names:
        strategies.get_class(n, "--strategies")
    inputs = load_inputs(args.experiment, args.overrides)
    out = Path(args.out or f"results/sweep-{inputs.experiment.experiment.name}")
    if args.address:
        from hetune.ray_executor import RayExecutor
        executor: Any = RayExecutor(args.address)
    else:
        executor = LocalExecutor(args.jobs)
    bar = tqdm(total=len(names) * args.seeds, desc="sweep", unit="run", file=sys.stderr, disable=args.quiet)

    def progress(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()

    rows = run_sweep(args.experiment, args.overrides, names, range(args.seeds), out, executor,
                     resume=args.resume, progress=progress)
    bar.close()
    rank = ranking(rows)
    print(format_ranking(rank))
    print(f"best strategy: {rank[0]['strategy']}  (results in {out}/sweep.csv)")
    return 0


def cmd_plots(args: argparse.Namespace) -> int:
    from plots.cli import run_plots

    return run_plots(args.inputs, Path(args.out), all_results=args.all, pdf=args.pdf)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from calibrate.runner import CalibrateRequest, run_calibration

    req = CalibrateRequest(cluster=args.cluster, models=[m.strip() for m in args.models.split(",") if m.strip()],
                           batch_sizes=args.batch_sizes, steps=args.steps, out=args.out, warmup=args.warmup,
                           repeat=args.repeat, holdout=args.holdout, merge=args.merge, resume=args.resume,
                           address=args.address, data_dir=args.data_dir, stem=args.stem,
                           devices=[d for d in args.devices.split(",") if d])
    bars: list[Any] = []  # made on the first cell, so bad input prints only its error line

    def progress(desc: str, done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, unit="cell", file=sys.stderr, disable=args.quiet))
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


def cmd_validate(args: argparse.Namespace) -> int:
    from real.validate import run_validate

    from real.repeat import summarize_repeats

    if args.repeat < 1:
        raise ConfigError("--repeat", "", f"must be >= 1, got {args.repeat}")
    out = Path(args.out)
    runs = []
    for r in range(args.repeat):
        run_out = out if args.repeat == 1 else out / f"repeat-{r}"
        seed = (args.seed or 0) + r if args.repeat > 1 else args.seed
        summary = run_validate(args.experiment, args.overrides, args.strategy, run_out, data_dir=args.data_dir,
                               seed=seed, report_interval_s=args.report_interval, address=args.address,
                               quiet=args.quiet, resume=args.resume)
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


def cmd_compare(args: argparse.Namespace) -> int:
    from real.compare import compare, format_fidelity

    print(format_fidelity(compare(Path(args.run), args.overrides)))
    return 0


def cmd_curves(args: argparse.Namespace) -> int:
    from calibrate.curves import write_curves

    params, stats, restarts = write_curves(args.events, Path(args.out), args.model, args.dataset,
                                           Path(args.calibration) if args.calibration else None)
    for device, seconds in restarts.items():
        print(f"{args.model} on {device}: trial restart overhead {seconds:.2f} s (median of recorded switches)")
    print(f"{args.model}: max_accuracy {params.max_accuracy:.3f}, tau {params.tau_iterations:.1f} iterations, "
          f"lr_opt {params.lr_opt:.4g}, width {params.width_decades} decades, noise {params.noise_std:.3f} "
          f"(RMSE {stats['rmse']:.4f} over {stats['points']} accuracies) -> {args.out}")
    return 0


def cmd_adapt_build(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from real.adapt_clock import read_clock
    from real.adapt_scenario import load_scenario
    from real.adapt_table import build_table

    if args.repeats < 1:
        raise ConfigError("--repeats", "", f"must be >= 1, got {args.repeats}")
    scenario = load_scenario(args.experiment, args.overrides)
    clock = read_clock(scenario, args.clock) if args.clock else None
    bar = tqdm(total=64 * args.repeats, unit="seq", file=sys.stderr, disable=args.quiet, desc=scenario.name)

    def progress(done: int, total: int) -> None:
        bar.total = total  # fewer than 64 x repeats when resuming
        bar.n = done
        bar.refresh()

    rows = build_table(scenario, Path(args.out), repeats=args.repeats, seed=args.seed, progress=progress,
                       resume=args.resume, clock=clock)
    bar.close()
    best = max(rows, key=lambda r: r["acc"])
    print(f"{scenario.name}: 64 sequences, best {best['a1']}{best['a2']}{best['a3']} acc {best['acc']:.3f} -> {args.out}")
    return 0


def cmd_adapt_clock(args: argparse.Namespace) -> int:
    from real.adapt_clock import measure_clock
    from real.adapt_scenario import load_scenario
    from real.net2net import SMALL_MODELS
    from sim.tomlfile import atomic_write_json

    if args.rounds < 1:
        raise ConfigError("--rounds", "", f"must be >= 1, got {args.rounds}")
    scenario = load_scenario(args.experiment, args.overrides)
    cost = measure_clock(scenario, rounds=args.rounds)
    atomic_write_json(Path(args.out), cost.to_json())
    epoch, ev = cost.measured(SMALL_MODELS[scenario.model]()) or (math.nan, math.nan)
    print(f"{scenario.model}: {len(cost.to_json()['costs'])} structures timed over {args.rounds} rounds; "
          f"the base model {epoch:.4f} s per epoch, {ev:.4f} s per evaluation (measured) -> {args.out}")
    return 0


def cmd_adapt_learn(args: argparse.Namespace) -> int:
    import time

    from real.adapt_csv import read_table
    from real.adapt_policy import greedy, learn, load_policy, save_policy
    from sim.tomlfile import atomic_write_json

    if args.episodes < 1:
        raise ConfigError("--episodes", "", f"must be >= 1, got {args.episodes}")
    if not args.clip >= 0:  # also refuses nan
        raise ConfigError("--clip", "", f"must be >= 0 (0 = no clipping), got {args.clip}")
    out = Path(args.out)
    init, meta = None, {}
    if args.init:
        if Path(args.init).resolve() == out.resolve():  # fine-tuning in place would overwrite the source policy
            raise ConfigError("--out", "", f"is the --init policy {args.init}: write the fine-tuned one elsewhere")
        init, init_digest = load_policy(Path(args.init))
        meta = {"init": args.init, "init_sha256": init_digest}
    tables = [read_table(t, args.model) for t in args.tables]
    t0 = time.perf_counter()
    policy, history = learn(tables, episodes=args.episodes, seed=args.seed, init=init, clip=args.clip)
    seconds = time.perf_counter() - t0
    digest = save_policy(policy, out, {"tables": [str(t) for t in args.tables], "episodes": args.episodes,
                                       "seed": args.seed, "clip": args.clip, "seconds": round(seconds, 2),
                                       **meta})
    atomic_write_json(out / "history.json", history)
    for t in tables:
        seq = greedy(policy, t)
        print(f"{t.source}: greedy {seq} acc {t.rows[seq].acc:.3f} rank {t.rank(seq)}/64")
    print(f"learned in {seconds:.1f} s -> {out} (sha256 {digest[:12]})")
    return 0


def cmd_adapt_evaluate(args: argparse.Namespace) -> int:
    from real.adapt_policy import evaluate
    from sim.tomlfile import atomic_write_json

    results = [evaluate(Path(args.policy), t, args.model) for t in args.tables]
    for r in results:
        noise = "" if r["gap_se"] is None or r["sequence"] == r["best_sequence"] else (
            f" ({100 * r['gap_to_best']:.2f} points below it, se {100 * r['gap_se']:.2f}: "
            f"{'within' if r['within_noise'] else 'outside'} the noise)")
        print(f"{r['table']}: sequence {tuple(r['sequence'])} acc {r['accuracy']:.3f} rank {r['rank']}/64; "
              f"best {tuple(r['best_sequence'])} acc {r['best_accuracy']:.3f}{noise}; "
              f"no adaptation rank {r['no_adaptation_rank']} (policy {r['policy_sha256'][:12]})")
    out = Path(args.out) if args.out else Path(args.policy) / "evaluation.json"
    atomic_write_json(out, results)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hetune", description="Plan and run PBT on heterogeneous clusters.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("strategies", help="list registered strategies")
    p.set_defaults(fn=cmd_strategies)

    p = sub.add_parser("simulate", help="simulate one PBT run")
    p.add_argument("experiment", nargs="?", default=DEFAULT_EXPERIMENT)
    p.add_argument("--strategy", help="strategy name (default: the experiment's strategy.name)")
    p.add_argument("--seed", type=int)
    p.add_argument("--out", help="result folder")
    p.add_argument("--replay", help="events.jsonl of a recorded run: re-time that exact population")
    p.add_argument("--adapt-policy", help="policy folder from `hetune adapt learn`: deepen a trial's model when "
                                          "a strategy moves it to a faster worker (approximate, see real/adapt_hook.py)")
    _add_common(p)
    p.set_defaults(fn=cmd_simulate)

    p = sub.add_parser("sweep", help="simulate strategies x seeds and rank the strategies")
    p.add_argument("experiment", nargs="?", default=DEFAULT_EXPERIMENT)
    p.add_argument("--strategies", default="all", help="'all' or a comma-separated list")
    p.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    p.add_argument("--jobs", type=int, default=2, help="parallel processes (default 2)")
    p.add_argument("--out", help="sweep folder")
    p.add_argument("--resume", action="store_true", help="keep finished cells in --out and run the rest")
    p.add_argument("--address", help="run cells as Ray tasks on this Ray cluster (auto or ray://host:port)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_common(p)
    p.set_defaults(fn=cmd_sweep)

    p = sub.add_parser("plots", help="regenerate figures from result files")
    p.add_argument("inputs", nargs="*", help="result folders, sweep folders, calibration TOML files")
    p.add_argument("--all", action="store_true", help="every result folder under results/")
    p.add_argument("--out", default="plots/figures")
    p.add_argument("--pdf", action="store_true", help="also write PDFs")
    p.set_defaults(fn=cmd_plots)

    p = sub.add_parser("calibrate", help="measure step times through Ray and fit the simulator's models")
    p.add_argument("--cluster", default="configs/clusters/local.toml", help="cluster config naming the device types")
    p.add_argument("--models", default="resnet18", help="comma-separated: resnet18 (CIFAR-10), resnet50 (CIFAR-100)")
    p.add_argument("--batch-sizes", type=_int_list, default=[32, 64, 128, 256])
    p.add_argument("--holdout", type=_int_list, default=[], help="batch sizes measured only to check the fit")
    p.add_argument("--steps", type=int, default=20, help="timed steps per cell")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per cell")
    p.add_argument("--repeat", type=int, default=1, help="repeats per cell; the spread is reported")
    p.add_argument("--devices", default="", help="only these device types (comma-separated)")
    p.add_argument("--out", required=True, help="calibration TOML to write")
    p.add_argument("--merge", action="store_true", help="keep the other device types already in --out")
    p.add_argument("--resume", action="store_true", help="skip cells already in --out")
    p.add_argument("--address", default="", help="existing Ray cluster (auto or ray://host:port); default: local")
    p.add_argument("--data-dir", default="", help="folder with the CIFAR python folders; default: synthetic batches")
    p.add_argument("--stem", default="imagenet", help="imagenet (torchvision as is) or cifar (3x3 stem, no pool)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_calibrate)

    p = sub.add_parser("calibrate-curves", help="fit the learning-curve surrogate to recorded runs "
                                                "(also: hetune calibrate curves ...)")
    p.add_argument("events", nargs="+", help="events.jsonl files or run folders of real runs")
    p.add_argument("--out", required=True, help="calibration file to write (the base plus [curves.<model>])")
    p.add_argument("--calibration", default="", help="base calibration (default: the run folder's)")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100"])
    p.set_defaults(fn=cmd_curves)

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
    _add_common(p)
    p.set_defaults(fn=cmd_validate)

    p = sub.add_parser("compare", help="real run against the simulator's prediction of it")
    p.add_argument("run", help="a folder written by validate")
    _add_common(p)
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("adapt", help="learn when to deepen a model (Net2Net) as a job gets more resources")
    asub = p.add_subparsers(dest="adapt_command", required=True)
    q = asub.add_parser("build-table", help="train every action sequence of a scenario for real")
    q.add_argument("experiment", help="a scenario file (configs/experiments/adapt-*.toml)")
    q.add_argument("--out", required=True, help="CSV to write")
    q.add_argument("--repeats", type=int, default=1)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--resume", action="store_true",
                   help="keep the repeats already in --out and add repeats up to --repeats (same clock)")
    q.add_argument("--clock", default="",
                   help="cost model from `hetune adapt clock` (or another table's .cost.json) instead of "
                        "measuring one: scenarios built on one clock differ by the scenario alone")
    q.add_argument("--quiet", action="store_true")
    _add_common(q)
    q.set_defaults(fn=cmd_adapt_build)
    q = asub.add_parser("clock", help="measure what an epoch and an evaluation of each reachable model cost")
    q.add_argument("experiment", help="a scenario file (its model and work per step, epoch and evaluation)")
    q.add_argument("--out", required=True, help="JSON to write, for build-table --clock")
    q.add_argument("--rounds", type=int, default=40, help="interleaved timed rounds; the fastest counts")
    _add_common(q)
    q.set_defaults(fn=cmd_adapt_clock)
    q = asub.add_parser("learn", help="REINFORCE on one or more tables")
    q.add_argument("tables", nargs="+")
    q.add_argument("--episodes", type=int, default=20_000)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--model", default="", help="base model when a table has no model column")
    q.add_argument("--init", default="", help="policy folder to start from: fine-tune a policy learned on other "
                                              "scenarios on these tables (its folder is left as it is)")
    q.add_argument("--clip", type=float, default=5.0,
                   help="largest gradient norm of an update, 0 = no clipping (see real/adapt_policy.learn)")
    q.add_argument("--out", required=True, help="policy folder")
    q.set_defaults(fn=cmd_adapt_learn)
    q = asub.add_parser("evaluate", help="greedy play of a policy on tables")
    q.add_argument("policy", help="policy folder from learn")
    q.add_argument("tables", nargs="+")
    q.add_argument("--model", default="")
    q.add_argument("--out", default="", help="JSON (default: <policy>/evaluation.json)")
    q.set_defaults(fn=cmd_adapt_evaluate)

    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["calibrate", "curves"]:  # `hetune calibrate curves` is the curves subcommand
        argv = ["calibrate-curves"] + argv[2:]
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except ConfigError as exc:
        print(f"hetune: error: {exc.line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hetune: interrupted; finished results were kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`hetune ... | head`): files are written before anything is
        # printed, so stop quietly with the shell's SIGPIPE status, as other CLIs do; point
        # stdout at /dev/null so the flush at exit does not raise a second time
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
