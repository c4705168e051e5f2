"""How well learned policies generalise across scenario tables: leave-one-out and transfer.

Each pick (the sequence a policy plays greedily on a table it did not learn from) is reported
with its rank among the 64 sequences, its regret (accuracy points below the table's best) and
whether the table's repeats can tell it from the best at all; next to it, the pooled-lookup
baseline, which needs no learning: the sequence best on average over the tables the policy
learned from (each table's accuracies standardised), played on the same table.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Sequence

import numpy as np

from hetune.adapt.policy import greedy, learn
from hetune.adapt.tables import SEQUENCES, Table

Seq = tuple[int, int, int]


def pooled_lookup(tables: Sequence[Table]) -> Seq:
    """The sequence with the best accuracy averaged over ``tables``, each table's accuracies standardised."""
    z = np.zeros(len(SEQUENCES))
    for t in tables:
        acc = np.array([t.rows[s].acc for s in SEQUENCES])
        z += (acc - acc.mean()) / (acc.std() or 1.0)
    return SEQUENCES[int(z.argmax())]


def pick(table: Table, seq: Seq) -> dict[str, Any]:
    """A sequence played on a table: its rank, accuracy, regret (points) and whether it is within noise of the best.

    ``within_noise`` is None when the table carries no repeats (``acc_runs``) or standard errors.
    """
    best = table.best()
    gap, se = table.gap(best.actions, seq)
    known = not math.isnan(se)
    return {"sequence": list(seq), "rank": table.rank(seq), "accuracy": table.rows[seq].acc,
            "regret_points": round(100 * gap, 4), "within_noise": (gap <= 2 * se) if known else None}


def _row(kind: str, table: Table, learned_from: Sequence[Table], seed: int, seq: Seq) -> dict[str, Any]:
    base = pooled_lookup(learned_from)
    return {"kind": kind, "table": table.source, "learned_from": [t.source for t in learned_from], "seed": seed,
            "best_sequence": list(table.best().actions), "policy": pick(table, seq), "pooled_lookup": pick(table, base)}


def leave_one_out(tables: Sequence[Table], seeds: Sequence[int], episodes: int = 20_000, clip: float = 5.0,
                  progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """For each table and seed: a policy learned on all the other tables, played on the one left out.

    Args:
        tables: two or more scenario tables.
        seeds: learning seeds.
        episodes: episodes per policy.
        clip: gradient-norm clip of the learner.
        progress: called with (done, total) after each policy.
    """
    rows, total = [], len(tables) * len(seeds)
    for i, left_out in enumerate(tables):
        rest = [t for j, t in enumerate(tables) if j != i]
        for seed in seeds:
            policy, _ = learn(rest, episodes=episodes, seed=seed, clip=clip)
            rows.append(_row("leave-one-out", left_out, rest, seed, greedy(policy, left_out)))
            if progress:
                progress(len(rows), total)
    return rows


def transfer(tables: Sequence[Table], seeds: Sequence[int], episodes: int = 20_000, clip: float = 5.0,
             progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """For each source table and seed: a policy learned on that table alone, played on every other table.

    Args: as :func:`leave_one_out`.
    """
    rows, total, done = [], len(tables) * len(seeds), 0
    for i, source in enumerate(tables):
        for seed in seeds:
            policy, _ = learn([source], episodes=episodes, seed=seed, clip=clip)
            rows += [_row("transfer", t, [source], seed, greedy(policy, t)) for j, t in enumerate(tables) if j != i]
            done += 1
            if progress:
                progress(done, total)
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean regret (points) and mean rank of the policies and of the pooled lookup over all rows.

    ``no_worse_than_lookup`` is the target of issue "A codebase...": the policies' mean regret is at
    most the lookup's.
    """
    mean = statistics.fmean
    pol = [r["policy"] for r in rows]
    base = [r["pooled_lookup"] for r in rows]
    out = {"picks": len(rows),
           "policy_mean_regret_points": round(mean(p["regret_points"] for p in pol), 4),
           "lookup_mean_regret_points": round(mean(p["regret_points"] for p in base), 4),
           "policy_mean_rank": round(mean(p["rank"] for p in pol), 2),
           "lookup_mean_rank": round(mean(p["rank"] for p in base), 2),
           "policy_within_noise": sum(p["within_noise"] is True for p in pol),
           "lookup_within_noise": sum(p["within_noise"] is True for p in base)}
    out["no_worse_than_lookup"] = out["policy_mean_regret_points"] <= out["lookup_mean_regret_points"]
    return out


def format_rows(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per pick: table, seed, the policy's and the lookup's sequence, rank, regret and noise."""
    def cell(p: dict[str, Any]) -> str:
        noise = {None: "", True: ", within noise", False: ""}[p["within_noise"]]
        return f"{''.join(map(str, p['sequence']))} rank {p['rank']:>2}/64 regret {p['regret_points']:5.2f}{noise}"

    return [f"{r['kind']} {r['table']} seed {r['seed']}: policy {cell(r['policy'])}; "
            f"pooled lookup {cell(r['pooled_lookup'])}" for r in rows]
