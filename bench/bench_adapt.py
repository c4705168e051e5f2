"""Adaptation targets on the 5 scenario tables (not part of the test run).

    python bench/bench_adapt.py results/adapt [--seeds 5]    # folder with early.csv ... late.csv
    python bench/bench_adapt.py results/adapt --replicate results/adapt2 [--merge]    # and a rebuild from seed 100
    python bench/bench_adapt.py results/adapt5 --convnet3 results/adapt6    # and convnet3 tables of the same scenarios
    python bench/bench_adapt.py results/adapt4 --finetune --seeds 2    # transfer by fine-tuning: a few episodes
    python bench/bench_adapt.py results/adapt4 --held-out results/adapt4/up{105,170,235,300}.csv
    python bench/bench_adapt.py results/adapt5 --first 4    # the tables built on one clock, first 4 repeats
    python bench/bench_adapt.py results/adapt5 --halves    # repeats 1-8 against 9-16: two independent builds
    python bench/bench_adapt.py --clocks results/adapt5/clock.json results/adapt4/*.cost.json    # clocks compared
    python bench/bench_adapt.py results/adapt5 --seeds 20 [--ensemble 5]    # seed spread; averaged policies

1. learned from scratch on each table (20,000 episodes): greedy rank (target: top 3 on every one, < 60 s each);
2. transfer: the policy of each table on the 4 others (target: top 10 on each);
3. leave-one-out: learned on 4 tables, evaluated on the fifth (target: top 5 for each).

With --held-out (no target in the issue): the policy learned on all five tables, played on
scenarios whose tables no learner choice was made on (the "up" between two of the five).
With --finetune: transfer with some learning, a few episodes from another scenario's policy
(`learn --init`) against as many from scratch.

Seed 0 is the headline (what `hetune adapt learn --seed 0` gives); the other seeds show
how much of it is luck of the seed. The last table is a bound that needs no learning:
the best any single fixed sequence does, as its worst rank over a set of tables. When no
sequence ranks in the top k of all 4 other tables, a transfer target of top k on each is
met only if the policy reads from the time left which sequence each scenario favours.
The very last table says how wide each table's top is: the sequences that the repeats
cannot tell apart from the best, whose order among themselves is noise; the leave-one-out
table says whether the policy's pick is among them.

Two baselines need no learning, and say whether the policy learned more than a lookup:
for transfer, the source table's best sequence replayed on the others; for
leave-one-out, the sequence best on average over the 4 tables learned from. The
leave-one-out table also ranks the two neighbouring scenarios' bests on the left-out
table: how well interpolating in time could do.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any
from pathlib import Path


from hetune.adapt.evaluation import pooled_lookup
from hetune.adapt.policy import NO_ADAPTATION, greedy, learn
from hetune.adapt.tables import Table, read_table

from adapt_analysis import (NAMES, best_fixed, clocks, ensemble, indistinct, lookup_transfer, merged,  # noqa: E402
                            near_best_transfer, neighbours_best, plateau, replication, repeats_of, some_repeats)


def other_model(tables: dict[str, Table], folder: Path, seeds: range) -> None:
    """Policies learned on the convnet2 tables, played on convnet3 tables of the same scenarios.

    convnet3's structure (64 channels, no pooling, other parameter counts) never appears
    in the convnet2 tables, so its states are new to those policies; the features, not a
    vocabulary, decide what they do there. Learned from scratch on the convnet3 table, and
    the convnet2 table's best replayed (no learning), are the references.
    """
    print("| convnet3 scenario | best (acc) | no-adaptation rank | learned from scratch, seeds 0-%d "
          "| the same scenario's convnet2 policy, seeds 0-%d | all 5 convnet2 tables' policy, seeds 0-%d "
          "| the other convnet3 tables' policy, seeds 0-%d | convnet2 table's best replayed |"
          % ((seeds[-1],) * 4))
    print("|---|---|---:|---|---|---|---|---:|")
    other = {n: read_table(folder / f"{n}.csv") for n in NAMES if (folder / f"{n}.csv").is_file()}
    on_all = {seed: learn(list(tables.values()), episodes=20_000, seed=seed)[0] for seed in seeds}  # one per seed
    for n, t in other.items():
        ranks: dict[str, list[int]] = {"scratch": [], "same": [], "all": [], "other3": []}
        for seed in seeds:
            ranks["scratch"].append(t.rank(greedy(learn([t], episodes=20_000, seed=seed)[0], t)))
            ranks["same"].append(t.rank(greedy(learn([tables[n]], episodes=20_000, seed=seed)[0], t)))
            ranks["all"].append(t.rank(greedy(on_all[seed], t)))
            rest = [o for m, o in other.items() if m != n]
            if rest:
                ranks["other3"].append(t.rank(greedy(learn(rest, episodes=20_000, seed=seed)[0], t)))
        best = t.best()
        print(f"| {n} | {''.join(map(str, best.actions))} ({best.acc:.3f}) | {t.rank(NO_ADAPTATION)} | "
              + " | ".join(" ".join(map(str, r)) or "-" for r in ranks.values())
              + f" | {t.rank(tables[n].best().actions)} |", flush=True)


def held_out(tables: dict[str, Table], paths: list[Path], seeds: range) -> None:
    """Scenarios whose tables no learner choice was made on: the policy learned on all five tables, greedy there.

    Baselines without learning: the sequence best on average over the five, and the bests
    of the five scenarios ranked on the held-out table (the nearest in "up" time is the one
    interpolation would favour).
    """
    policies = [learn(list(tables.values()), episodes=20_000, seed=seed)[0] for seed in seeds]
    pooled = pooled_lookup(list(tables.values()))
    print(f"| held-out table | best (acc) | no-adaptation rank | rank of the all-five policy, seeds 0-{seeds[-1]} "
          "| its pick, seed 0 | within noise of the best | pooled best of the 5, rank | each scenario's best, rank "
          "| within 2 standard errors of the best |")
    print("|---|---|---:|---|---|---|---:|---|---|")
    for path in paths:
        t = read_table(path)
        picks = [greedy(p, t) for p in policies]
        best = t.best()
        near = "yes" if picks[0] in indistinct(path)[0] else "no"
        print(f"| {path.stem} | {''.join(map(str, best.actions))} ({best.acc:.3f}) | {t.rank(NO_ADAPTATION)} "
              f"| {' '.join(str(t.rank(p)) for p in picks)} | {''.join(map(str, picks[0]))} | {near} "
              f"| {t.rank(pooled)} | {', '.join(f'{n}: {t.rank(u.best().actions)}' for n, u in tables.items())} "
              f"| {plateau(path)} |", flush=True)


def fine_tuning(tables: dict[str, Table], seeds: range, budgets: tuple[int, ...] = (500, 1000, 2000)) -> None:
    """Transfer with some learning: each scenario's policy (seed 0, 20,000 episodes) fine-tuned on each other
    table for a few episodes (``learn(init=...)``), against as many episodes from scratch on that table."""
    sources = {n: learn([t], episodes=20_000, seed=0)[0] for n, t in tables.items()}
    pairs = [(n, m) for n in NAMES for m in NAMES if m != n]
    print(f"| episodes | start | top 3 (of {len(pairs) * len(seeds)}: 20 pairs x seeds 0-{seeds[-1]}) "
          "| top 10 | worst rank | mean seconds |")
    print("|---:|---|---:|---:|---:|---:|")
    for episodes in budgets:
        for start in ("scratch", "other scenario's policy"):
            ranks, secs = [], []
            for n, m in pairs:
                for seed in seeds:
                    t0 = time.perf_counter()
                    policy, _ = learn([tables[m]], episodes=episodes, seed=seed,
                                      init=None if start == "scratch" else sources[n])
                    secs.append(time.perf_counter() - t0)
                    ranks.append(tables[m].rank(greedy(policy, tables[m])))
            print(f"| {episodes} | {start} | {sum(r <= 3 for r in ranks)} | {sum(r <= 10 for r in ranks)} "
                  f"| {max(ranks)} | {sum(secs) / len(secs):.2f} |", flush=True)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default="results/adapt")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--replicate", default="",
                    help="a folder with a second build of the 5 tables from other seeds (--seed 100)")
    ap.add_argument("--merge", action="store_true",
                    help="with --replicate: run the analysis on the two builds pooled (weighted by their repeats)")
    ap.add_argument("--convnet3", default="",
                    help="a folder with convnet3 tables of some of the scenarios: how convnet2 policies play there")
    ap.add_argument("--held-out", nargs="+", default=[],
                    help="tables of other scenarios (e.g. results/adapt4/up235.csv): only the held-out table, "
                         "the policy learned on the five played there")
    ap.add_argument("--clocks", nargs="+", default=[],
                    help="cost files (a clock from `hetune adapt clock` first): how far each one's costs are from it")
    ap.add_argument("--first", type=int, default=0,
                    help="use only each table's first K repeats (from acc_runs): compare builds at equal repeats")
    ap.add_argument("--halves", action="store_true",
                    help="only the replication table, between each table's first and second half of its repeats "
                         "(two independent builds): how far a table's order is noise")
    ap.add_argument("--ensemble", type=int, default=1,
                    help="leave-one-out with K policies per seed (seeds seed*K ... seed*K+K-1), their softmax "
                         "averaged: a variance-reduction trial, not what `hetune adapt learn` does")
    ap.add_argument("--finetune", action="store_true",
                    help="only the fine-tuning table: a few episodes from another scenario's policy vs from scratch")
    return ap


def main() -> None:
    args = _parser().parse_args()
    if args.clocks:
        clocks([Path(p) for p in args.clocks])
        return
    folder = Path(args.folder)
    if args.first:
        folder = some_repeats(folder, 0, args.first, Path(tempfile.mkdtemp(prefix="bench-adapt-")))
        print(f"{args.folder}, the first {args.first} repeats of each table:\n")
    if args.halves:
        half = repeats_of(folder / f"{NAMES[0]}.csv") // 2
        tmp = Path(tempfile.mkdtemp(prefix="bench-adapt-"))
        a, b = (some_repeats(folder, i * half, (i + 1) * half, tmp / str(i)) for i in range(2))
        print(f"{args.folder}: repeats 1-{half} against {half + 1}-{2 * half} of each table\n")
        replication({n: read_table(a / f"{n}.csv") for n in NAMES}, {n: read_table(b / f"{n}.csv") for n in NAMES})
        return
    tables = {n: read_table(folder / f"{n}.csv") for n in NAMES}
    if args.replicate:
        second = {n: read_table(Path(args.replicate) / f"{n}.csv") for n in NAMES}
        replication(tables, second)
        print()
        if args.merge:
            weights = {n: (repeats_of(folder / f"{n}.csv"), repeats_of(Path(args.replicate) / f"{n}.csv"))
                       for n in NAMES}
            tables = {n: merged(tables[n], second[n], *weights[n]) for n in NAMES}
            print(f"pooled with {args.replicate} (repeats per table: "
                  f"{', '.join(f'{a}+{b}' for a, b in weights.values())}):\n")
    seeds = range(args.seeds)
    if args.finetune:
        fine_tuning(tables, seeds)
        return
    if args.held_out:
        held_out(tables, [Path(p) for p in args.held_out], seeds)
        return

    def near_best(seq: tuple[int, int, int], name: str) -> bool | None:
        """Whether ``seq`` is within noise of table ``name``'s best (None on pooled tables: no per-repeat data)."""
        return None if args.merge else seq in indistinct(folder / f"{name}.csv")[0]

    _learned(tables, seeds, near_best, args.merge)
    _left_out(tables, seeds, near_best, args.ensemble)
    _fixed(tables)
    if not args.merge:
        print()
        near_best_transfer(tables, folder)
    print()
    folders = [folder] + ([Path(args.replicate)] if args.replicate else [])
    print("| table | " + " | ".join(f"sequences within 2 standard errors of the best, {f}" for f in folders) + " |")
    print("|---|" + "---|" * len(folders))
    for n in NAMES:  # of each build on its own (a pooled table has no per-repeat accuracies)
        print(f"| {n} | " + " | ".join(plateau(f / f"{n}.csv") for f in folders) + " |")
    if args.convnet3:
        print()
        other_model(tables, Path(args.convnet3), seeds)


def _learned(tables: dict, seeds: range, near_best: Any, merged_tables: bool) -> None:
    """Per scenario: a policy learned on it, its rank there and its transfer to the other four."""
    print("| scenario | best (acc) | no-adaptation rank | learned rank, seed 0 | seeds 0-%d | seconds (max) "
          "| transfer ranks, seed 0 | transfer worst, seeds 0-%d | its best replayed, worst "
          "| transfer picks within noise of the best, seed 0 |" % (seeds[-1], seeds[-1]))
    print("|---|---|---:|---:|---|---:|---|---|---:|---|")
    for n, t in tables.items():
        ranks, worst, secs, transfer0 = [], [], [], ""
        for seed in seeds:
            t0 = time.perf_counter()
            policy, _ = learn([t], episodes=20_000, seed=seed)
            secs.append(time.perf_counter() - t0)
            ranks.append(t.rank(greedy(policy, t)))
            picks = {m: greedy(policy, tables[m]) for m in NAMES if m != n}
            tr = {m: tables[m].rank(seq) for m, seq in picks.items()}
            worst.append(max(tr.values()))
            if seed == 0:
                transfer0 = ", ".join(f"{m}: {r}" for m, r in tr.items())
                near = [near_best(seq, m) for m, seq in picks.items()]
                close = "n/a (pooled)" if merged_tables else f"{sum(map(bool, near))} of 4"
        best = t.best()
        print(f"| {n} | {''.join(map(str, best.actions))} ({best.acc:.3f}) | {t.rank(NO_ADAPTATION)} | {ranks[0]} "
              f"| {' '.join(map(str, ranks))} | {max(secs):.1f} | {transfer0} | {' '.join(map(str, worst))} "
              f"| {lookup_transfer(t, [tables[m] for m in NAMES if m != n])} | {close} |",
              flush=True)
    print()


def _left_out(tables: dict, seeds: range, near_best: Any, k: int) -> None:
    """Per scenario: the policy learned on the other four, played on it."""
    print("| left out | rank, seed 0 | seeds 0-%d | seeds in the top 5 | within noise of its best, seed 0 "
          "| pooled best of the 4, rank | the neighbours' bests, ranks |" % seeds[-1])
    print("|---|---:|---|---:|---|---:|---|")
    for n in NAMES:
        ranks, rest = [], [tables[m] for m in NAMES if m != n]
        for seed in seeds:
            pick = greedy(ensemble(rest, seed, k), tables[n])
            ranks.append(tables[n].rank(pick))
            if seed == 0:
                close = {None: "n/a (pooled)", True: "yes", False: "no"}[near_best(pick, n)]
        print(f"| {n} | {ranks[0]} | {' '.join(map(str, ranks))} | {sum(r <= 5 for r in ranks)} of {len(ranks)} "
              f"| {close} | {tables[n].rank(pooled_lookup(rest))} | {neighbours_best(tables, n)} |", flush=True)
    print()


def _fixed(tables: dict) -> None:
    """The best single sequence over all tables but one, and over all five."""
    print("| tables | best single sequence | its worst rank over them |")
    print("|---|---|---:|")
    for n in NAMES:
        seq, worst = best_fixed([tables[m] for m in NAMES if m != n])
        print(f"| all but {n} | {''.join(map(str, seq))} | {worst} |")
    seq, worst = best_fixed(list(tables.values()))
    print(f"| all 5 | {''.join(map(str, seq))} | {worst} |")


if __name__ == "__main__":
    main()
