"""Simulator speed and memory benchmarks (not part of the test run).

    python bench/bench_sim.py                 # all four
    python bench/bench_sim.py default sweep scale sensitivity

default: the default experiment (20 trials x 1000 iterations on gavel-12), best of 5, one core, under
         each learning model (nqm, the default, and bell): the ratio is the cost of the model.
sweep:   `hetune sweep --strategies all --seeds 20 --jobs 2` on the default experiment, wall time.
scale:   N trials x 1000 iterations on a 4,096-GPU cluster (1,024 nodes of 4 GPUs, K80/P100/V100),
         N = 100, 1,000, 10,000; each point in a fresh process, wall time and peak RSS.
sensitivity: `hetune sweep --sensitivity 200 --strategies all --seeds 10 --jobs 2`, wall time.
Targets (issue 2): default < 0.5 s; sweep < 60 s; 10,000 trials < 120 s and < 2 GiB;
(issue "An honest simulator") sensitivity, 200 worlds x all strategies x 10 seeds, < 10 minutes;
(issue "A learning model in which PBT matters") nqm at most 2x bell's time, in the same run.
"""

from __future__ import annotations

import tomllib
import json
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
    for kind in ("nqm", "bell"):
        inputs = load_inputs(EXP, [f'learning.kind="{kind}"'])
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


def bench_scale() -> list[dict]:
    rows = []
    points = [(s, n, "nqm") for s in ("tune-default", "leader-fusion") for n in (100, 1000, 10000)]
    for strategy, n, kind in points + [("tune-default", 10000, "bell")]:  # the last: the model's cost at scale
        out = subprocess.run([sys.executable, __file__, "_point", str(n), strategy, kind], check=True, cwd=REPO,
                             capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(f"  {rows[-1]}", flush=True)
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
            print(f"default experiment, {s}, {kind}: {t * 1000:.0f} ms (target < 500 ms){ratio}", flush=True)
    if "sweep" in which:
        print(f"sweep all strategies x 20 seeds, --jobs 2: {bench_sweep():.1f} s (target < 60 s)", flush=True)
    if "sensitivity" in which:
        print(f"sensitivity 200 worlds x all strategies x 10 seeds, --jobs 2: {bench_sensitivity():.0f} s "
              "(target < 600 s)", flush=True)
    if "scale" in which:
        print("scale (fresh process per point):", flush=True)
        rows = bench_scale()
        print("| strategy | model | trials | devices | wall s | events | peak RSS MiB |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['strategy']} | {r['model']} | {r['trials']:,} | {r['devices']:,} | {r['wall_s']} | "
                  f"{r['events']:,} | {r['peak_rss_mib']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
