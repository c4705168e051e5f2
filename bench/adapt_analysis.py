"""Table analyses shared by bench_adapt.py: noise plateaus, repeat agreement, clocks, lookups, replication."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hetune.adapt.policy import Policy, learn
from hetune.adapt.tables import SEQUENCES, Row, Table, read_table

NAMES = ["early", "early-middle", "middle", "middle-late", "late"]


def best_fixed(tables: list[Table]) -> tuple[tuple[int, int, int], int]:
    """The sequence whose worst rank over ``tables`` is smallest, and that rank."""
    return best_fixed_among(list(SEQUENCES), tables)


def repeat_runs(df: "pd.DataFrame") -> "np.ndarray | None":
    """Each repeat's accuracy per sequence (sequences x repeats), or None without ``acc_runs`` or with one repeat."""
    import numpy as np
    if "acc_runs" not in df or df["repeats"].iloc[0] < 2:
        return None
    return np.array([[float(a) for a in str(r).split()] for r in df["acc_runs"]])


@functools.lru_cache
def indistinct(path: Path) -> tuple[set[tuple[int, int, int]], str]:
    """The sequences the repeats cannot tell from the table's best (mean gap <= 2 standard errors), and how.

    Each gap and its error are ``Table.gap``'s: paired repeat by repeat with an ``acc_runs`` column
    (the sequences of a repeat share data and batch order, so this is the noise of a difference);
    else from ``acc_se``.
    """
    import numpy as np
    table = read_table(path)
    best = table.best().actions
    gaps = {s: table.gap(best, s) for s in table.rows}
    se = np.array([e for _, e in gaps.values()])
    if np.isnan(se).all():
        return {best}, "one repeat"
    if len(table.rows[best].runs) >= 2:
        how = f"paired, median se {np.median(se[se > 0]):.4f}"
    else:
        how = f"unpaired, median se {np.nanmedian([r.acc_se for r in table.rows.values()]):.4f}"
    return {s for s, (gap, e) in gaps.items() if gap <= 2 * e}, how


def plateau(path: Path) -> str:
    """How many sequences the repeats cannot tell from the table's best, and how well repeats agree."""
    seqs, how = indistinct(path)
    return f"{len(seqs)} ({how}; {repeat_agreement(path)})"


def repeat_agreement(path: Path) -> str:
    """Mean rank correlation of the 64 sequences' accuracies between two repeats of a table.

    How reproducible one repeat's ordering is: 1 = every repeat orders the sequences alike.
    The table's mean over n repeats is more reliable than one repeat (Spearman-Brown: about
    n r / (1 + (n - 1) r) for the correlation r of single repeats).
    """
    import numpy as np
    import pandas as pd
    runs = repeat_runs(pd.read_csv(path))
    if runs is None:
        return "one repeat"
    n = runs.shape[1]
    ranks = pd.DataFrame(runs).rank()
    r = float(ranks.corr().to_numpy()[np.triu_indices(n, 1)].mean())  # over the pairs of repeats
    return f"repeats agree {r:.2f}, the mean of {n} {n * r / (1 + (n - 1) * r):.2f}"


def clocks(paths: list[Path]) -> None:
    """How each cost file's measured costs differ from the first file's (a shared clock).

    Prints the base model's epoch cost and, per file, how much dearer than on the first clock
    the deepened structures' epochs are relative to the base model's: what decides whether a
    deepening pays for its time.
    """
    import json

    import numpy as np

    def costs(p: Path) -> dict[str, tuple[float, float]]:
        return {k: (e, v) for k, e, v in json.loads(p.read_text())["costs"]}
    ref = costs(paths[0])
    base = min(ref, key=len)  # the base model has the fewest parameters, so the shortest structure
    print(f"| cost file | base epoch (s, measured) | vs {paths[0]} | deepened epochs relative to the base, "
          "vs that clock: median | max |")
    print("|---|---:|---:|---:|---:|")
    for p in paths:
        c = costs(p)
        rel = np.array([(c[k][0] / c[base][0]) / (ref[k][0] / ref[base][0]) - 1 for k in ref if k != base and k in c])
        print(f"| {p} | {c[base][0]:.4f} | {c[base][0] / ref[base][0] - 1:+.0%} | {np.median(rel):+.0%} "
              f"| {rel[np.abs(rel).argmax()]:+.0%} |")


def some_repeats(folder: Path, start: int, stop: int, into: Path) -> Path:
    """Copies of ``folder``'s five tables averaged over their repeats ``start`` to ``stop - 1`` only, in ``into``.

    Two builds from the same seed share their repeats' data and batch orders, so comparing them
    at equal repeats isolates what else changed (the clock, for results/adapt4 and adapt5).
    Repeats of one table use distinct seeds, so two disjoint ranges are two independent builds.
    """
    import numpy as np
    import pandas as pd
    k = stop - start
    into.mkdir(parents=True, exist_ok=True)
    for n in NAMES:
        df = pd.read_csv(folder / f"{n}.csv")
        runs = repeat_runs(df)
        if runs is None or runs.shape[1] < stop:
            sys.exit(f"{folder / n}.csv: fewer than {stop} repeats in acc_runs")
        runs = runs[:, start:stop]
        df["acc"] = runs.mean(axis=1).round(5)
        df["acc_se"] = (runs.std(axis=1, ddof=1) / np.sqrt(k)).round(5) if k > 1 else np.nan
        df["acc_runs"] = [" ".join(f"{a:.5f}" for a in r) for r in runs]
        df["repeats"] = k
        df.to_csv(into / f"{n}.csv", index=False)
    return into


def lookup_transfer(source: Table, targets: list[Table]) -> int:
    """No learning: the source table's best sequence replayed on each target; its worst rank."""
    return max(t.rank(source.best().actions) for t in targets)


def ensemble(tables: list[Table], seed: int, k: int) -> AveragedPolicy:
    """K policies learned on ``tables`` from seeds seed*K ... seed*K+K-1, averaged (k = 1: the policy of ``seed``)."""
    return AveragedPolicy([learn(tables, episodes=20_000, seed=seed * k + j)[0] for j in range(k)])


class AveragedPolicy(torch.nn.Module):
    """Several policies as one: the log of their averaged action probabilities, for ``greedy``."""

    def __init__(self, policies: list[Policy]) -> None:
        super().__init__()
        self.members = torch.nn.ModuleList(policies)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.softmax(p(x), 1) for p in self.members]).mean(0).log()


def neighbours_best(tables: dict[str, Table], name: str) -> str:
    """The best sequences of the scenarios next in time to ``name`` (up earlier, later), ranked on its table.

    Not a baseline a learner can reach by lookup (which neighbour is closer in outcome is
    unknown without the table); it says how far interpolating between neighbours could go.
    """
    i = NAMES.index(name)
    near = [NAMES[j] for j in (i - 1, i + 1) if 0 <= j < len(NAMES)]
    return ", ".join(f"{m}: {tables[name].rank(tables[m].best().actions)}" for m in near)


def near_best_transfer(tables: dict[str, Table], folder: Path) -> None:
    """For each source table, the sequences its repeats cannot tell from its best, replayed on the 4 others.

    A policy that plays one sequence everywhere and is near-best on its source can do no better
    than the best of these on transfer; when that is worse than 10th, meeting the transfer target
    takes a policy that plays differently where the time left differs, which one table shows little of.
    """
    print("| source | sequences within noise of its best | the best of them on the other 4: sequence, worst rank |")
    print("|---|---:|---|")
    for n in NAMES:
        near = indistinct(folder / f"{n}.csv")[0]
        seq, worst = best_fixed_among(sorted(near), [tables[m] for m in NAMES if m != n])
        print(f"| {n} | {len(near)} | {''.join(map(str, seq))}, {worst} |")


def best_fixed_among(candidates: list[tuple[int, int, int]],
                     tables: list[Table]) -> tuple[tuple[int, int, int], int]:
    """Among ``candidates``, the sequence whose worst rank over ``tables`` is smallest, and that rank."""
    return min(((seq, max(t.rank(seq) for t in tables)) for seq in candidates), key=lambda p: p[1])


def repeats_of(path: Path) -> int:
    """The repeats a table averages (its ``repeats`` column; 1 when absent)."""
    import pandas as pd
    df = pd.read_csv(path)
    return int(df["repeats"].iloc[0]) if "repeats" in df else 1


def merged(first: Table, second: Table, w1: int = 1, w2: int = 1) -> Table:
    """Two builds of one scenario pooled, weighted by their repeats: acc and times left are the means.

    The builds measured their clocks separately (times left differ by up to ~3% of the
    budget), so the pool is an approximation of one build with the repeats of both.
    """
    def mean(a: float, b: float) -> float:
        return (w1 * a + w2 * b) / (w1 + w2)
    rows = {s: Row(s, tuple(mean(a, b) for a, b in zip(first.rows[s].times_left, second.rows[s].times_left)),
                   first.rows[s].total_time, mean(first.rows[s].acc, second.rows[s].acc)) for s in SEQUENCES}
    return Table(rows, first.model, f"{first.source}+{second.source}")


def replication(first: dict[str, Table], second: dict[str, Table]) -> None:
    """Two builds of each scenario from other seeds: how much of a table's order survives a rebuild."""
    import numpy as np
    print("| scenario | rank correlation of the two builds | rank in build 2 of build 1's best "
          "| of build 1's top 5, in build 2's top 5 |")
    print("|---|---:|---:|---:|")
    for n in NAMES:
        a = np.array([first[n].rows[s].acc for s in SEQUENCES])
        b = np.array([second[n].rows[s].acc for s in SEQUENCES])
        rho = np.corrcoef(a.argsort().argsort(), b.argsort().argsort())[0, 1]  # Spearman
        top_a = {s for s in SEQUENCES if first[n].rank(s) <= 5}
        top_b = {s for s in SEQUENCES if second[n].rank(s) <= 5}
        print(f"| {n} | {rho:.2f} | {second[n].rank(first[n].best().actions)} | {len(top_a & top_b)} |")
