"""The `hetune adapt` group: build tables, measure a clock, learn and evaluate policies."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from hetune.common import add_force_option, add_set_option, positive, progress_bar
from hetune.sim.outdir import claim_file, claim_folder
from hetune.sim.errors import ConfigError


def cmd_adapt_build(args: argparse.Namespace) -> int:
    """Train every action sequence of a scenario for real and write its table (CSV)."""

    from hetune.adapt.clock import read_clock
    from hetune.adapt.scenario import load_scenario
    from hetune.adapt.build import build_table

    positive(args.repeats, "--repeats")
    scenario = load_scenario(args.experiment, args.overrides)
    claim_file(Path(args.out), keep=args.resume, force=args.force)
    clock = read_clock(scenario, args.clock) if args.clock else None
    bar = progress_bar(args.quiet, total=64 * args.repeats, unit="seq", desc=scenario.name)

    def progress(done: int, total: int) -> None:
        bar.total = total  # fewer than 64 x repeats when resuming
        bar.n = done
        bar.refresh()

    rows = build_table(scenario, Path(args.out), repeats=args.repeats, seed=args.seed, progress=progress,
                       resume=args.resume, clock=clock)
    bar.close()
    best = max(rows, key=lambda r: r["acc"])
    print(f"{scenario.name}: 64 sequences, best {best['a1']}{best['a2']}{best['a3']} acc {best['acc']:.3f} "
          f"-> {args.out}")
    return 0


def cmd_adapt_clock(args: argparse.Namespace) -> int:
    """Measure what an epoch and an evaluation of each reachable model cost; write JSON."""
    from hetune.adapt.clock import measure_clock
    from hetune.adapt.scenario import load_scenario
    from hetune.adapt.net2net import SMALL_MODELS
    from hetune.sim.tomlfile import atomic_write_json

    positive(args.rounds, "--rounds")
    scenario = load_scenario(args.experiment, args.overrides)
    claim_file(Path(args.out), force=args.force, keep_flags="")
    cost = measure_clock(scenario, rounds=args.rounds)
    atomic_write_json(Path(args.out), cost.to_json())
    epoch, ev = cost.measured(SMALL_MODELS[scenario.model]()) or (math.nan, math.nan)
    print(f"{scenario.model}: {len(cost.to_json()['costs'])} structures timed over {args.rounds} rounds; "
          f"the base model {epoch:.4f} s per epoch, {ev:.4f} s per evaluation (measured) -> {args.out}")
    return 0


def cmd_adapt_learn(args: argparse.Namespace) -> int:
    """Learn a deepening policy with REINFORCE on tables; write the policy folder."""
    import time

    from hetune.adapt.tables import read_table
    from hetune.adapt.policy import greedy, learn, load_policy, save_policy
    from hetune.sim.tomlfile import atomic_write_json

    positive(args.episodes, "--episodes")
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
    claim_folder(out, force=args.force, can_resume=False)
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


def cmd_adapt_generalise(args: argparse.Namespace) -> int:
    """Leave-one-out or transfer over tables: learn policies, play them where they did not learn, report
    each pick against the pooled-lookup baseline."""

    from hetune.adapt import evaluation
    from hetune.adapt.tables import read_table
    from hetune.sim.tomlfile import atomic_write_json

    flag = "--leave-one-out" if args.leave_one_out else "--transfer"
    if args.leave_one_out and args.transfer:
        raise ConfigError("--transfer", "", "cannot be combined with --leave-one-out (run them one at a time)")
    if len(args.inputs) < 2:
        raise ConfigError(flag, "", f"needs two or more tables, got {len(args.inputs)}")
    positive(args.seeds, "--seeds")
    positive(args.episodes, "--episodes")
    if not args.clip >= 0:
        raise ConfigError("--clip", "", f"must be >= 0 (0 = no clipping), got {args.clip}")
    tables = [read_table(t, args.model) for t in args.inputs]
    if args.out:
        claim_file(Path(args.out), force=args.force, keep_flags="")
    bar = progress_bar(args.quiet, total=len(tables) * args.seeds, unit="policy", desc=flag[2:])

    def progress(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()

    run = evaluation.leave_one_out if args.leave_one_out else evaluation.transfer
    rows = run(tables, range(args.seeds), episodes=args.episodes, clip=args.clip, progress=progress)
    bar.close()
    summary = evaluation.summary(rows)
    for line in evaluation.format_rows(rows):
        print(line)
    print(f"{flag[2:]}: {summary['picks']} picks; mean regret {summary['policy_mean_regret_points']:.2f} points "
          f"(mean rank {summary['policy_mean_rank']:.1f}, {summary['policy_within_noise']} within noise) against "
          f"the pooled lookup's {summary['lookup_mean_regret_points']:.2f} "
          f"(mean rank {summary['lookup_mean_rank']:.1f}, "
          f"{summary['lookup_within_noise']} within noise): "
          f"{'no worse' if summary['no_worse_than_lookup'] else 'worse'} than the lookup")
    if args.out:
        atomic_write_json(Path(args.out), {"summary": summary, "picks": rows, "seeds": args.seeds,
                                           "episodes": args.episodes, "clip": args.clip})
    return 0


def _policy_lookup(policy_dir: Path, model: str) -> tuple[int, int, int] | None:
    """The pooled-lookup sequence of the tables a policy learned from (policy.json), or None when any
    of them cannot be read any more (moved or deleted): the baseline of a held-out evaluation."""
    import json

    from hetune.adapt.evaluation import pooled_lookup
    from hetune.adapt.tables import read_table

    try:
        paths = json.loads((policy_dir / "policy.json").read_text())["tables"]
        return pooled_lookup([read_table(t, model) for t in paths])
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return None


def cmd_adapt_evaluate(args: argparse.Namespace) -> int:
    """Play a policy greedily on tables; print and write each pick's rank and gap (and, when the policy's
    own tables are readable, the pooled lookup of those tables played on the same table)."""
    from hetune.adapt.evaluation import pick
    from hetune.adapt.policy import evaluate
    from hetune.adapt.tables import read_table
    from hetune.sim.tomlfile import atomic_write_json

    if args.leave_one_out or args.transfer:
        return cmd_adapt_generalise(args)
    if len(args.inputs) < 2:
        raise ConfigError("evaluate", "", "name a policy folder and one or more tables "
                          "(or --leave-one-out / --transfer with tables)")
    args.policy, args.tables = args.inputs[0], args.inputs[1:]
    results = [evaluate(Path(args.policy), t, args.model) for t in args.tables]
    lookup = _policy_lookup(Path(args.policy), args.model)
    for r in results:
        noise = "" if r["gap_se"] is None or r["sequence"] == r["best_sequence"] else (
            f" ({100 * r['gap_to_best']:.2f} points below it, se {100 * r['gap_se']:.2f}: "
            f"{'within' if r['within_noise'] else 'outside'} the noise)")
        base = ""
        if lookup is not None:
            r["pooled_lookup"] = pick(read_table(r["table"], args.model), lookup)
            base = (f"; pooled lookup of the policy's tables {tuple(lookup)} rank {r['pooled_lookup']['rank']}/64, "
                    f"regret {r['pooled_lookup']['regret_points']:.2f} points")
        print(f"{r['table']}: sequence {tuple(r['sequence'])} acc {r['accuracy']:.3f} rank {r['rank']}/64; "
              f"best {tuple(r['best_sequence'])} acc {r['best_accuracy']:.3f}{noise}; "
              f"no adaptation rank {r['no_adaptation_rank']}{base} (policy {r['policy_sha256'][:12]})")
    out = Path(args.out) if args.out else Path(args.policy) / "evaluation.json"
    atomic_write_json(out, results)
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the adapt group and its subcommands to the parser."""
    p = sub.add_parser("adapt", help="learn when to deepen a model (Net2Net) as a job gets more resources")
    asub = p.add_subparsers(dest="adapt_command", required=True)
    q = asub.add_parser("build-table", help="train every action sequence of a scenario for real")
    q.add_argument("experiment", help="a scenario file (configs/adapt/adapt-*.toml)")
    q.add_argument("--out", required=True, help="CSV to write")
    add_force_option(q, "table")
    q.add_argument("--repeats", type=int, default=1)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--resume", action="store_true",
                   help="keep the repeats already in --out and add repeats up to --repeats (same clock)")
    q.add_argument("--clock", default="",
                   help="cost model from `hetune adapt clock` (or another table's .cost.json) instead of "
                        "measuring one: scenarios built on one clock differ by the scenario alone")
    q.add_argument("--quiet", action="store_true")
    add_set_option(q)
    q.set_defaults(fn=cmd_adapt_build, needs_torch=True)
    q = asub.add_parser("clock", help="measure what an epoch and an evaluation of each reachable model cost")
    q.add_argument("experiment", help="a scenario file (its model and work per step, epoch and evaluation)")
    q.add_argument("--out", required=True, help="JSON to write, for build-table --clock")
    add_force_option(q, "clock")
    q.add_argument("--rounds", type=int, default=40, help="interleaved timed rounds; the fastest counts")
    add_set_option(q)
    q.set_defaults(fn=cmd_adapt_clock, needs_torch=True)
    q = asub.add_parser("learn", help="REINFORCE on one or more tables")
    q.add_argument("tables", nargs="+")
    q.add_argument("--episodes", type=int, default=20_000)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--model", default="", help="base model when a table has no model column")
    q.add_argument("--init", default="", help="policy folder to start from: fine-tune a policy learned on other "
                                              "scenarios on these tables (its folder is left as it is)")
    q.add_argument("--clip", type=float, default=5.0,
                   help="largest gradient norm of an update, 0 = no clipping (see adapt/policy.learn)")
    q.add_argument("--out", required=True, help="policy folder")
    add_force_option(q, "policy")
    q.set_defaults(fn=cmd_adapt_learn, needs_torch=True)
    q = asub.add_parser("evaluate", help="greedy play of a policy on tables; or, with --leave-one-out or "
                                         "--transfer, how policies learned on some tables play on the others")
    q.add_argument("inputs", nargs="+", metavar="POLICY TABLE",
                   help="a policy folder from learn, then tables; with --leave-one-out or --transfer: tables only")
    q.add_argument("--leave-one-out", action="store_true",
                   help="per table and seed: learn on all the other tables, play on this one")
    q.add_argument("--transfer", action="store_true",
                   help="per table and seed: learn on this table alone, play on each of the others")
    q.add_argument("--seeds", type=int, default=5, help="with --leave-one-out/--transfer: seeds 0..N-1 (default 5)")
    q.add_argument("--episodes", type=int, default=20_000, help="with --leave-one-out/--transfer: per policy")
    q.add_argument("--clip", type=float, default=5.0, help="with --leave-one-out/--transfer: as in learn")
    q.add_argument("--model", default="")
    q.add_argument("--out", default="", help="JSON (default: <policy>/evaluation.json; with --leave-one-out or "
                                             "--transfer: none unless given)")
    add_force_option(q, "evaluation")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.set_defaults(fn=cmd_adapt_evaluate, needs_torch=True)
