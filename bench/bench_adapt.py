"""Adaptation targets on the 5 scenario tables (not part of the test run).

    python bench/bench_adapt.py results/adapt     # folder with early.csv ... late.csv

1. learned from scratch on each table (20,000 episodes): greedy rank (target: top 3 on every one, < 60 s each);
2. transfer: the policy of each table on the 4 others (target: top 10 on each);
3. leave-one-out: learned on 4 tables, evaluated on the fifth (target: top 5 for each).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from real.adapt_csv import read_table  # noqa: E402
from real.adapt_policy import greedy, learn  # noqa: E402

NAMES = ["early", "early-middle", "middle", "middle-late", "late"]


def main(folder: Path) -> None:
    tables = {n: read_table(folder / f"{n}.csv") for n in NAMES}
    print("| scenario | best acc | no-adaptation rank | learned rank | seconds | transfer ranks (other 4) |")
    print("|---|---:|---:|---:|---:|---|")
    policies = {}
    for n, t in tables.items():
        t0 = time.perf_counter()
        policy, _ = learn([t], episodes=20_000, seed=0)
        secs = time.perf_counter() - t0
        policies[n] = policy
        seq = greedy(policy, t)
        transfer = [f"{m}: {tables[m].rank(greedy(policy, tables[m]))}" for m in NAMES if m != n]
        print(f"| {n} | {t.best().acc:.3f} | {t.rank((3, 3, 3))} | {t.rank(seq)} | {secs:.1f} | {', '.join(transfer)} |",
              flush=True)
    print()
    print("| left out | rank (learned on the other 4) |")
    print("|---|---:|")
    for n in NAMES:
        policy, _ = learn([tables[m] for m in NAMES if m != n], episodes=20_000, seed=0)
        print(f"| {n} | {tables[n].rank(greedy(policy, tables[n]))} |", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/adapt"))
