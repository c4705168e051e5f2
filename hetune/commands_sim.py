"""Subcommands that simulate and plot (no torch): strategies, simulate, sweep, plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hetune.common import add_force_option, add_set_option, add_size_option, default_experiment, positive, progress_bar
from hetune.sim.size import check_size
from hetune.sim.errors import ConfigError, EventLimitReached, RunFailed
from hetune.sim.learning import LearningModelFailed


def cmd_strategies(args: argparse.Namespace) -> int:
    """Print the registered strategies, one line each."""
    from hetune.sim import strategies

    for name in strategies.names():
        print(f"{name:<26}{strategies.REGISTRY[name].summary}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """Simulate one PBT run and write its folder (events, summary, resolved config)."""
    from hetune.sim.engine import simulate
    from hetune.sim.loader import load_inputs
    from hetune.sim.outdir import claim_folder
    from hetune.sim.results import write_run

    inputs = load_inputs(args.experiment, args.overrides)
    strategy = args.strategy or inputs.experiment.strategy.name
    inputs.strategy_params(strategy)
    check_size(inputs, args.max_events)
    seed = inputs.experiment.experiment.seed if args.seed is None else args.seed
    if seed < 0:
        raise ConfigError("--seed", "", f"must be >= 0, got {seed}")
    out = Path(args.out or f"results/{inputs.experiment.experiment.name}-{strategy}-s{seed}")
    claim_folder(out, force=args.force, can_resume=False)
    population = None
    if args.replay:
        from hetune.sim.events import read_events
        from hetune.sim.replay import ReplayPopulation
        population = ReplayPopulation(read_events(args.replay), args.replay)
    hooks: list[Any] = []
    if args.adapt_policy:
        from hetune.adapt.hook import PolicyHook
        hooks.append(PolicyHook(Path(args.adapt_policy)))
    try:
        result = simulate(inputs, inputs.make_strategy(strategy), seed, population, hooks, max_events=args.max_events)
    except (LearningModelFailed, EventLimitReached) as exc:  # a user's model failed, or the run grew past the
        # limit: what ran before is kept
        events = getattr(exc, "events", [])
        if events:
            from hetune.sim.events import dumps
            from hetune.sim.snapshot import write_snapshot
            from hetune.sim.tomlfile import atomic_write_text

            write_snapshot(out, inputs, strategy, seed, frozen="with the partial events of a failed run")
            atomic_write_text(out / "events.partial.jsonl", dumps(events))
            raise RunFailed(f"{exc}; the {len(events)} events before it are in "
                            f"{out / 'events.partial.jsonl'}") from None
        raise
    summary = write_run(out, inputs, result.events, strategy, seed,
                        extra={"replay_of": str(Path(args.replay).resolve())} if args.replay else None)
    ttt = summary["time_to_target_s"]
    print(f"{strategy} seed {seed}: time to target {'never' if ttt is None else f'{ttt:,.0f} s'}, "
          f"makespan {summary['makespan_s']:,.0f} s, best accuracy {summary['best_accuracy']:.3f}, "
          f"exploits {summary['exploits']}, cost ${summary['cost']:.2f} -> {out}")
    return 0


MAX_CELLS = 1_000_000  # simulations one sweep runs: its rows (about 2 KB each) stay in memory


def cmd_sweep(args: argparse.Namespace) -> int:
    """Simulate strategies x seeds, write the sweep folder and print the ranking."""

    from hetune.sim import strategies
    from hetune.sim.loader import load_inputs
    from hetune.sim.outdir import claim_folder
    from hetune.sim.standings import format_ranking, ranking
    from hetune.sim.sweep import LocalExecutor, run_sweep

    positive(args.seeds, "--seeds")
    positive(args.jobs, "--jobs")
    names = (strategies.names() if args.strategies == "all"
             else [s.strip() for s in args.strategies.split(",") if s.strip()])
    if not names:
        raise ConfigError("--strategies", "", f"names no strategy ({args.strategies!r}): give 'all' or names "
                                              "separated by commas")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError("--strategies", "", f"names {', '.join(twice)} more than once")
    for n in names:
        strategies.get_class(n, "--strategies")
    if args.sensitivity < 0:
        positive(args.sensitivity, "--sensitivity")
    if args.draws < 0:
        positive(args.draws, "--draws")
    if args.draws and args.sensitivity:
        raise ConfigError("--draws", "", "cannot be combined with --sensitivity (one kind of world per sweep)")
    cells = len(names) * args.seeds * max(1, args.sensitivity, args.draws)
    if cells > MAX_CELLS:  # every cell's row is held in memory and rewritten to sweep.csv: refuse before writing
        raise ConfigError("--seeds", "", f"{len(names)} strategies x {args.seeds:,} seeds"
                          + (f" x {max(args.sensitivity, args.draws):,} worlds" if cells > len(names) * args.seeds
                             else "") + f" = {cells:,} simulations, more than a sweep holds ({MAX_CELLS:,})")
    inputs = load_inputs(args.experiment, args.overrides)
    check_size(inputs, args.max_events)
    kind = "draws" if args.draws else "sensitivity" if args.sensitivity else "sweep"
    out = Path(args.out or f"results/{kind}-{inputs.experiment.experiment.name}")
    claim_folder(out, resume=args.resume, force=args.force)
    if args.address:
        from hetune.real.ray_executor import RayExecutor
        executor: Any = RayExecutor(args.address)
    else:
        executor = LocalExecutor(args.jobs)
    bar = progress_bar(args.quiet, total=len(names) * args.seeds * max(1, args.sensitivity), desc=kind, unit="run")

    def progress(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()

    if args.draws:
        from hetune.sim.draws import format_draws, run_draws

        bar.total = len(names) * args.seeds * args.draws
        result = run_draws(args.experiment, args.overrides, names, range(args.seeds), args.draws, out, executor,
                           resume=args.resume, max_events=args.max_events, progress=progress)
        bar.close()
        print(format_draws(result))
        print(f"(results in {out}/draws.json and {out}/draw-<d>/sweep.csv)")
        return 0
    if args.sensitivity:
        from hetune.sim.sensitivity import format_robustness, run_sensitivity

        _, rob = run_sensitivity(args.experiment, args.overrides, names, range(args.seeds), args.sensitivity, out,
                                 executor, resume=args.resume, progress=progress)
        bar.close()
        print(format_robustness(rob, inputs.experiment.experiment.objective))
        print(f"(results in {out}/robustness.json and sensitivity.csv)")
        return 0

    rows = run_sweep(args.experiment, args.overrides, names, range(args.seeds), out, executor,
                     resume=args.resume, progress=progress, max_events=args.max_events)
    bar.close()
    info = inputs.experiment.experiment
    rank = ranking(rows, objective=info.objective, budget=info.budget_mode)
    print(format_ranking(rank, info.objective))
    print(f"best strategy: {rank[0]['strategy']}  (results in {out}/sweep.csv)")
    return 0


def cmd_plots(args: argparse.Namespace) -> int:
    """Regenerate figures from result folders, sweep folders and calibration files."""
    from hetune.plots.cli import run_plots

    return run_plots(args.inputs, Path(args.out), all_results=args.all, pdf=args.pdf)


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add strategies, simulate, sweep and plots to the parser."""
    p = sub.add_parser("strategies", help="list registered strategies")
    p.set_defaults(fn=cmd_strategies)

    p = sub.add_parser("simulate", help="simulate one PBT run")
    p.add_argument("experiment", nargs="?", default=default_experiment())
    p.add_argument("--strategy", help="strategy name (default: the experiment's strategy.name)")
    p.add_argument("--seed", type=int)
    p.add_argument("--out", help="result folder")
    add_force_option(p, "run")
    add_size_option(p)
    p.add_argument("--replay", help="events.jsonl of a recorded run: re-time that exact population")
    p.add_argument("--adapt-policy", help="policy folder from `hetune adapt learn`: deepen a trial's model when "
                                          "a strategy moves it to a faster worker (approximate, see adapt/hook.py)")
    add_set_option(p)
    p.set_defaults(fn=cmd_simulate)

    p = sub.add_parser("sweep", help="simulate strategies x seeds and rank the strategies")
    p.add_argument("experiment", nargs="?", default=default_experiment())
    p.add_argument("--strategies", default="all", help="'all' or a comma-separated list")
    p.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    p.add_argument("--jobs", type=int, default=2, help="parallel processes (default 2)")
    p.add_argument("--out", help="sweep folder")
    p.add_argument("--resume", action="store_true", help="keep finished cells in --out and run the rest")
    add_force_option(p, "sweep")
    add_size_option(p)
    p.add_argument("--address", help="run cells as Ray tasks on this Ray cluster (auto or ray://host:port)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_set_option(p)
    p.add_argument("--draws", type=int, default=0, metavar="D",
                   help="run the sweep in D worlds, each with one draw of the learning model's parameters from its "
                        "fit's uncertainty, and report how often each strategy ranks first (docs/simulator.md)")
    p.add_argument("--sensitivity", type=int, default=0, metavar="WORLDS",
                   help="perturb the calibration and surrogate within the experiment's [sensitivity] ranges: "
                        "WORLDS worlds x strategies x seeds, and report how often each strategy stays first")
    p.set_defaults(fn=cmd_sweep)

    p = sub.add_parser("plots", help="regenerate figures from result files")
    p.add_argument("inputs", nargs="*", help="result folders, sweep folders, calibration TOML files")
    p.add_argument("--all", action="store_true", help="every result folder under results/")
    p.add_argument("--out", default="plots/figures")
    p.add_argument("--pdf", action="store_true", help="also write PDFs")
    p.set_defaults(fn=cmd_plots)
