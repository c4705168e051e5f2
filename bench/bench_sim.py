"""Simulator speed and memory benchmarks (not part of the test run).

    python bench/bench_sim.py                 # all four
    python bench/bench_sim.py default sweep scale sensitivity

default: the default experiment (20 trials x 1000 iterations on gavel-12), best of 5, one core, under
         each learning model (nqm, bell, and skills, the default's fit, its draws on and its reading noise
         raised): the ratio to bell is the cost of the model.
sweep:   `hetune sweep --strategies all --seeds 20 --jobs 2` on the default experiment, wall time.
scale:   N trials x 1000 iterations on a 4,096-GPU cluster (1,024 nodes of 4 GPUs, K80/P100/V100),
         N = 100, 1,000, 10,000, every strategy; each point in a fresh process: wall time, events per second,
         peak RSS, and the ratio to the same point's events per second in the last run (bench/bench_sim_scale.json,
         rewritten by each run; the host is shared: a ratio below 1 at every point is load, one point far below
         the others a regression).
sensitivity: `hetune sweep --sensitivity 200 --strategies all --seeds 10 --jobs 2`, wall time.
Targets (issue 2): default < 0.5 s; sweep < 60 s; 10,000 trials < 120 s and < 2 GiB; (issue "The engine:
O(1) per event again") 10,000 trials >= 100,000 events per second for every strategy, default < 25 ms;
(issue "An honest simulator") sensitivity, 200 worlds x all strategies x 10 seeds, < 10 minutes;
(issue "A learning model in which PBT matters") nqm at most 2x bell's time, in the same run.
"""

from __future__ import annotations

import tomllib
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def bench_default() -> dict:
    from hetune.sim.engine import simulate
    from hetune.sim.loader import load_inputs

    out = {}
    for kind in ("nqm", "bell", "skills"):
        noise = ["learning.params.ar_std=0.05", "learning.params.shared_std=0.04"] if kind == "skills" else []
        inputs = load_inputs(EXP, [f'learning.kind="{kind}"'] + noise)
        for strategy in ("tune-default", "leader-fusion", "hrfs"):
            times = []
            for seed in range(5):
                t0 = time.perf_counter()
                simulate(inputs, inputs.make_strategy(strategy), seed)
                times.append(time.perf_counter() - t0)
            out[(kind, strategy)] = min(times)
    return out


def bench_sweep() -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hetune.cli", "sweep", str(EXP), "--strategies", "all", "--seeds", "20",
                        "--jobs", "2", "--out", d, "--quiet"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def bench_sensitivity(worlds: int = 200, seeds: int = 10) -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hetune.cli", "sweep", str(EXP), "--strategies", "all", "--seeds",
                        str(seeds), "--sensitivity", str(worlds), "--jobs", "2", "--out", d, "--quiet"],
                       check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def scale_point(trials: int, strategy: str, kind: str = "nqm") -> dict:
    """One scale point, run in this process (called in a fresh subprocess)."""
    from hetune.sim.engine import simulate
    from hetune.sim.loader import load_inputs

    with tempfile.TemporaryDirectory() as d:
        cluster = tomllib.loads((REPO / "configs/clusters/gavel-12.toml").read_text())
        cluster["cluster"]["name"] = "scale-4096"
        for node in cluster["nodes"]:
            node["count"] = 1024 // 3 + (1 if node["device"] == "v100" else 0)  # 341 + 341 + 342 nodes
        Path(d, "cluster.toml").write_text(tomli_w.dumps(cluster))
        inputs = load_inputs(EXP, [f"cluster.path={d}/cluster.toml", f"experiment.population={trials}",
                                   f'learning.kind="{kind}"'])
        devices = sum(n.count * n.gpus for n in inputs.cluster.nodes)
        t0 = time.perf_counter()
        res = simulate(inputs, inputs.make_strategy(strategy), 0)
        wall = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"trials": trials, "devices": devices, "strategy": strategy, "model": kind, "wall_s": round(wall, 2),
            "events": len(res.events), "peak_rss_mib": round(rss_mib)}


STRATEGIES = ("tune-default", "leader-fusion", "hrfs", "rank-aware", "random-search", "throughput-proportional")
LAST = REPO / "bench/bench_sim_scale.json"  # the scale figures of the last full run, for the comparison


def bench_scale(sizes: tuple[int, ...] = (100, 1000, 10000)) -> list[dict]:
    """Every strategy at every size (nqm), and tune-default at the largest under bell; each point in a fresh
    process, with events per second and the ratio to the same point's last recorded figure."""
    last = {(r["strategy"], r["model"], r["trials"]): r for r in
            (json.loads(LAST.read_text())["points"] if LAST.is_file() else [])}
    rows = []
    points = [(s, n, "nqm") for n in sizes for s in STRATEGIES] + [("tune-default", max(sizes), "bell")]
    for strategy, n, kind in points:
        out = subprocess.run([sys.executable, __file__, "_point", str(n), strategy, kind], check=True, cwd=REPO,
                             capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        r["events_per_s"] = round(r["events"] / max(r["wall_s"], 1e-9))
        before = last.get((strategy, kind, n))
        # a regression shows as a ratio well below 1 (the host is shared: compare ratios, not seconds)
        r["vs_last"] = round(r["events_per_s"] / before["events_per_s"], 2) if before else None
        rows.append(r)
        print(f"  {r}", flush=True)
    return rows


def main(argv: list[str]) -> None:
    if argv[:1] == ["_point"]:
        print(json.dumps(scale_point(int(argv[1]), argv[2], argv[3])))
        return
    which = argv or ["default", "sweep", "scale", "sensitivity"]
    if "default" in which:
        times = bench_default()
        for (kind, s), t in times.items():
            ratio = f", {t / times[('bell', s)]:.2f}x bell (target <= 2x)" if kind != "bell" else ""
            print(f"default experiment, {s}, {kind}: {t * 1000:.1f} ms (target < 25 ms){ratio}", flush=True)
    if "sweep" in which:
        print(f"sweep all strategies x 20 seeds, --jobs 2: {bench_sweep():.1f} s (target < 60 s)", flush=True)
    if "sensitivity" in which:
        print(f"sensitivity 200 worlds x all strategies x 10 seeds, --jobs 2: {bench_sensitivity():.0f} s "
              "(target < 600 s)", flush=True)
    if "scale" in which:
        print("scale (fresh process per point; 10,000 trials: target >= 100,000 events/s and < 2 GiB):", flush=True)
        rows = bench_scale()
        print("| strategy | model | trials | devices | wall s | events | events/s | vs last run | peak RSS MiB |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            vs = "" if r["vs_last"] is None else f"{r['vs_last']:.2f}x"
            print(f"| {r['strategy']} | {r['model']} | {r['trials']:,} | {r['devices']:,} | {r['wall_s']} | "
                  f"{r['events']:,} | {r['events_per_s']:,} | {vs} | {r['peak_rss_mib']} |")
        slow = [r for r in rows if r["vs_last"] is not None and r["vs_last"] < 0.7]
        for r in slow:
            print(f"REGRESSION? {r['strategy']} {r['model']} {r['trials']:,} trials: {r['vs_last']:.2f}x the last "
                  "recorded events per second", flush=True)
        LAST.write_text(json.dumps({"host": platform.node(), "date": time.strftime("%Y-%m-%d"), "points": rows},
                                   indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
