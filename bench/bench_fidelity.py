"""Fidelity: the simulator against real Ray Tune runs of every strategy, calibrated in the same run
on the same host (issue "One strategy, two engines"). Not part of the test run; it takes hours here.

    python bench/bench_fidelity.py                      # everything missing: calibrate, runs, compare, table
    python bench/bench_fidelity.py --only hrfs --seeds 0 # one part; rerun to continue
    python bench/bench_fidelity.py --table              # the table from what is there
    python bench/bench_fidelity.py --idle               # calibrated idle (each cell alone), for comparison
    python bench/bench_fidelity.py --recalibrate NAME   # the under-load runs, judged by a new calibration
    python bench/bench_fidelity.py --digits             # on real data: inputs, spreads, target and budget
                                                        # fixed first (bench/fidelity_digits.py), 3 seeds

Steps, each skipped when its output exists (so the benchmark runs in parts and resumes):
1. ``hetune calibrate --under-load`` of configs/clusters/fidelity-local.toml (step times at the
   experiment's batch sizes, thread scaling of the fusable node, the Ray Tune overhead probe, each
   timed while the cluster's other worker slots train: the emulated device types share this host's
   cores, as they do in every real run) into results/fidelity/<mode>/calibration-steps.toml, copied to
  configs/calibration/fidelity-local.toml,
   which the experiment names;
1b. one more real run that is never compared (Ray Tune's own PBT, seed CURVES_SEED) and
   ``hetune calibrate curves`` on it: learning curves fitted from a recorded run that is not one
   of the runs validated, into results/fidelity/calibration.toml (copied over the shipped file);
2. ``hetune validate`` of configs/experiments/fidelity-local.toml for every registered strategy
   and for Ray Tune's own PBT (``tune-default --plain``), one run per seed, into
   results/fidelity/runs/<strategy>-s<seed> (an interrupted run is continued with --resume);
3. ``hetune compare`` of each run (simulated with the same calibration, seed and config);
4. results/fidelity/table.md and table.json: refused when the runs were judged with different inputs
   (each run freezes its inputs before it starts, sim/snapshot.py; a changed model is a new
   benchmark folder); per strategy, the median over seeds of real and
   simulated makespan and time to target, their errors, and the replay error, next to the targets.

``--recalibrate NAME`` re-judges the under-load real runs without re-running them: step 1 again
into results/fidelity/NAME/ (the curves fitted from the same seed-100 run), then each run's record
(events, summary, config; not its Tune folder or data) copied to results/fidelity/NAME/runs/ and
compared with ``--set calibration.path=`` the new file. It shows what a change to calibrate does to
the errors; the calibration is then not from the same run as the real runs (same host, later).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fidelity_digits import pct  # bench/ is on the path: the script's own folder

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results" / "fidelity" / "under-load"  # --idle: results/fidelity/idle
EXPERIMENT = REPO / "configs/experiments/fidelity-local.toml"
CLUSTER = REPO / "configs/clusters/fidelity-local.toml"
SHIPPED_CALIBRATION = REPO / "configs/calibration/fidelity-local.toml"
CURVES_SEED = 100  # the curve-fitting run's seed: none of the compared runs uses it
TARGETS = {"makespan": 20.0, "time_to_target": 25.0, "replay": 10.0}  # |error| in %


def hetune(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "hetune.cli", *args], cwd=REPO, check=True)


def configurations() -> list[tuple[str, list[str]]]:
    """(label, validate flags) for every registered strategy and the plain Ray PBT reference."""
    from hetune.sim.strategies import names

    return ([(s, ["--strategy", s]) for s in names()]
            + [("tune-default-plain", ["--strategy", "tune-default", "--plain"])])


def calibrate_steps(steps: Path, under_load: bool) -> None:
    """Step 1: ``hetune calibrate`` of the emulated cluster at the experiment's batch sizes into ``steps``."""
    steps.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    hetune("calibrate", "--cluster", str(CLUSTER), "--models", "resnet18", "--batch-sizes", "4,8,16",
           "--steps", "5", "--out", str(steps), "--quiet", *(["--under-load"] if under_load else []))
    print(f"calibrated in {time.perf_counter() - t0:.0f} s -> {steps}", flush=True)


def calibrate() -> None:
    steps = OUT / "calibration-steps.toml"
    cal = OUT / "calibration.toml"
    if not steps.is_file():
        calibrate_steps(steps, under_load=OUT.name != "idle")
    if not cal.is_file():
        shutil.copy(steps, SHIPPED_CALIBRATION)
        folder = run("curves", ["--strategy", "tune-default", "--plain"], CURVES_SEED)
        hetune("calibrate", "curves", str(folder), "--calibration", str(steps), "--out", str(cal))
    shutil.copy(cal, SHIPPED_CALIBRATION)


JUDGED_SET: list[str] = []  # --digits: the target and budget fixed before any judged run (bench/fidelity_digits.py)


def run(label: str, flags: list[str], seed: int) -> Path:
    folder = OUT / "runs" / f"{label}-s{seed}"
    flags = flags + (JUDGED_SET if label != "curves" else [])
    if (folder / "summary.json").is_file():
        return folder
    resume = ["--resume"] if (folder / "events.partial.jsonl").is_file() else []
    t0 = time.perf_counter()
    hetune("validate", str(EXPERIMENT), *flags, "--seed", str(seed), "--out", str(folder), "--quiet", *resume)
    print(f"{label} seed {seed}: real run in {time.perf_counter() - t0:.0f} s", flush=True)
    return folder


def compare(folder: Path, *overrides: str) -> dict:
    if not (folder / "fidelity.json").is_file():
        hetune("compare", str(folder), *(x for o in overrides for x in ("--set", o)))
    return json.loads((folder / "fidelity.json").read_text())


def recalibrate(name: str) -> None:
    """The under-load runs compared again under a calibration measured now into results/fidelity/<name>."""
    global OUT
    source = OUT
    OUT = OUT.parent / name
    steps, cal = OUT / "calibration-steps.toml", OUT / "calibration.toml"
    if not steps.is_file():
        calibrate_steps(steps, under_load=True)
    if not cal.is_file():
        hetune("calibrate", "curves", str(source / "runs" / f"curves-s{CURVES_SEED}"), "--calibration", str(steps),
               "--out", str(cal))
    judge_copies(source, cal)


def judge_copies(source: Path, cal: Path, only_multicore: bool = False) -> None:
    """Every judged run of ``source`` (with ``only_multicore``, those with a worker of more than one
    core) copied into OUT/runs (less what compare writes) and compared under the calibration ``cal``;
    a copy already compared is kept (the step resumes)."""
    from hetune.sim.events import read_events

    for run_dir in sorted((source / "runs").glob("*-s*")):
        if run_dir.name.startswith("curves-") or not (run_dir / "summary.json").is_file():
            continue
        if only_multicore and not any(e["kind"] == "worker_added" and e["devices"] > 1
                                      for e in read_events(run_dir / "events.jsonl")):
            continue
        copy = OUT / "runs" / run_dir.name
        copy.mkdir(parents=True, exist_ok=True)
        for f in run_dir.iterdir():
            if f.is_file() and f.name not in ("fidelity.json", "sim-events.jsonl", "replay-events.jsonl"):
                shutil.copy(f, copy / f.name)
        compare(copy, f"calibration.path={cal.relative_to(REPO)}")  # cwd: the repository; no host path kept


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 1) if vals else None


def _ttt_ok(f: dict) -> bool:
    """Time to target agrees: within the target, or neither run reached it (a one-sided miss fails)."""
    real, sim = f["time_to_target_s"]["real"], f["time_to_target_s"]["sim"]
    if real is None or sim is None:
        return real is None and sim is None
    return abs(f["time_to_target_error_pct"]) <= TARGETS["time_to_target"]


def _share_gap(f: dict) -> float:
    """Largest difference, in percentage points, between the real and simulated share of iterations
    run on one device type."""
    return round(100 * max((abs(v["real"] - v["sim"]) for v in f.get("iteration_share", {}).values()), default=0.0), 1)


def _order(data: dict[str, dict]) -> str:
    """Do sim and real order the strategies alike by makespan? Swapped pairs, each with whether its
    real makespans overlap within the spread of the real runs (the issue's allowance)."""
    names = sorted(data)
    swaps = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ra, rb = data[a]["makespan_real_s"], data[b]["makespan_real_s"]
            sa, sb = data[a]["makespan_sim_s"], data[b]["makespan_sim_s"]
            if None in (ra, rb, sa, sb) or (ra - rb) * (sa - sb) >= 0:
                continue
            lo_a, hi_a = data[a]["makespan_real_range"]
            lo_b, hi_b = data[b]["makespan_real_range"]
            overlap = lo_a <= hi_b and lo_b <= hi_a
            swaps.append(f"{a} / {b} ({'within' if overlap else 'OUTSIDE'} the real spread)")
    return "sim orders the strategies by makespan as the real runs do" if not swaps else (
        "swapped by makespan: " + "; ".join(swaps))


def benchmark_inputs(fids: dict[str, dict]) -> str:
    """The one inputs hash every compared run was judged with (fidelity.json's ``inputs``); exits with
    status 2 and one line when runs of different inputs would share a table, or a run was compared
    before inputs were frozen: a changed model is a new benchmark, and the old table stays as it was."""
    hashes: dict[str, list[str]] = {}
    for name, f in sorted(fids.items()):
        h = (f.get("inputs") or {}).get("inputs_hash") or "none recorded (compared before inputs were frozen)"
        hashes.setdefault(h, []).append(name)
    if len(hashes) > 1 or any(h.startswith("none") for h in hashes):
        parts = "; ".join(f"{h[:12]}: {', '.join(names)}" for h, names in sorted(hashes.items()))
        print(f"bench_fidelity: error: {OUT}: the runs were judged with different inputs ({parts}); "
              "compare them again with the same inputs or start a new benchmark folder", file=sys.stderr)
        raise SystemExit(2)
    return next(iter(hashes), "")


def table(labels: list[str]) -> str:
    rows, data = [], {}
    every = {str(p.parent.name): json.loads(p.read_text()) for p in sorted((OUT / "runs").glob("*-s*/fidelity.json"))}
    judged = benchmark_inputs(every)
    for label in labels:
        fids = [json.loads(p.read_text()) for p in sorted((OUT / "runs").glob(f"{label}-s*/fidelity.json"))]
        fids = [f for f in fids if (f.get("strategy") == label.replace("-plain", ""))]
        if not fids:
            continue
        reals = [f["makespan_s"]["real"] for f in fids]
        med = {
            "runs": len(fids),
            "seeds": [f["seed"] for f in fids],
            "makespan_real_s": _median(reals),
            "makespan_real_range": [round(min(reals), 1), round(max(reals), 1)],
            "makespan_sim_s": _median([f["makespan_s"]["sim"] for f in fids]),
            "makespan_error_pct": _median([f["makespan_error_pct"] for f in fids]),
            "ttt_real_s": _median([f["time_to_target_s"]["real"] for f in fids]),
            "ttt_sim_s": _median([f["time_to_target_s"]["sim"] for f in fids]),
            "ttt_error_pct": _median([f["time_to_target_error_pct"] for f in fids]),
            "ttt_agree": sum(_ttt_ok(f) for f in fids),
            "replay_error_pct": _median([f["replay_makespan_error_pct"] for f in fids]),
            # the prediction a planner uses: the median over the simulated seeds, and whether the
            # real run fell inside the simulated 95% range
            "makespan_error_vs_median_pct": _median([f.get("makespan_error_vs_median_pct") for f in fids]),
            "within_sim_range": sum(bool(f.get("real_within_sim_spread", {}).get("makespan")) for f in fids),
            "exploits_real": _median([f["exploits"]["real"] for f in fids]),
            "exploits_sim": _median([f["exploits"]["sim"] for f in fids]),
            "share_gap_pp": _median([_share_gap(f) for f in fids]),
            "step_time_error_pct": {d: _median([f["step_time_error_pct"].get(d) for f in fids])
                                    for d in sorted({d for f in fids for d in f["step_time_error_pct"]})},
            "notes": sorted({f["calibration_note"] for f in fids if f.get("calibration_note")}),
        }
        data[label] = med
        rows.append(f"| {label} | {med['runs']} | {med['makespan_real_s']} | {med['makespan_sim_s']} | "
                    f"{pct(med['makespan_error_pct'])} | {med['ttt_real_s'] or 'never'} | "
                    f"{med['ttt_sim_s'] or 'never'} | "
                    f"{pct(med['ttt_error_pct'])} ({med['ttt_agree']}/{med['runs']} agree) | "
                    f"{pct(med['replay_error_pct'])} | {pct(med['makespan_error_vs_median_pct'])} "
                    f"({med['within_sim_range']}/{med['runs']} within) | "
                    f"{med['exploits_real']} / {med['exploits_sim']} | "
                    f"{med['share_gap_pp']} pp | "
                    + ", ".join(f"{d} {pct(v)}" for d, v in med["step_time_error_pct"].items()) + " |")
    head = (f"Measured on host {platform.node()!r}; medians over seeds; errors are (sim - real) / real; every run "
            f"judged with inputs hash {judged[:12]} (each run's inputs.json and fidelity.json).\n"
            f"Targets: |makespan error| <= {TARGETS['makespan']:g}%, |time-to-target error| <= "
            f"{TARGETS['time_to_target']:g}% (a run where only one of sim and real reaches the target is a miss), "
            f"|replay error| <= {TARGETS['replay']:g}%.\n\n"
            "| strategy | runs | makespan real s | sim s | error | time to target real s | sim s | error | "
            "replay error | makespan error of the simulated median (real within the sim's 95% range) | "
            "exploits real / sim | iteration share gap | step time error |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    text = head + "\n" + "\n".join(rows) + "\n\n" + _order(data) + "\n"
    extra: dict = {}
    if any("sim_spread" in f and "values" in f["sim_spread"]["makespan_s"] for f in every.values()):
        import fidelity_digits  # runs compared since the spread kept every seed's value

        more, extra = fidelity_digits.planner_section(OUT, labels)
        text += more
    (OUT / "table.md").write_text(text)
    (OUT / "table.json").write_text(json.dumps({"inputs_hash": judged, "strategies": data, "planner": extra},
                                               indent=1) + "\n")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated strategy labels (tune-default-plain for the reference)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (median over them)")
    ap.add_argument("--table", action="store_true", help="only write the table from the runs there")
    ap.add_argument("--idle", action="store_true", help="calibrate each cell alone (results/fidelity/idle)")
    ap.add_argument("--recalibrate", default="", metavar="NAME",
                    help="compare the under-load runs again under a calibration measured now (results/fidelity/NAME)")
    ap.add_argument("--digits", action="store_true",
                    help="the benchmark on the handwritten digits (results/fidelity/digits; bench/fidelity_digits.py)")
    ap.add_argument("--refit-threads", default="", metavar="NAME",
                    help="with --digits: its runs judged again with Amdahl's fraction per batch size, refitted from "
                         "their calibration's own samples (results/fidelity/NAME)")
    args = ap.parse_args()
    global OUT, EXPERIMENT, SHIPPED_CALIBRATION
    if args.idle:
        OUT = OUT.parent / "idle"
    if args.digits:
        OUT, EXPERIMENT = OUT.parent / "digits", REPO / "configs/experiments/fidelity-digits.toml"
        SHIPPED_CALIBRATION = REPO / "configs/calibration/fidelity-digits.toml"
        return digits(args)
    if args.recalibrate:
        recalibrate(args.recalibrate)
        print(table([c[0] for c in configurations()]))
        return
    configs = configurations()
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c[0] in wanted]
    if not args.table:
        calibrate()
        for seed in (int(s) for s in args.seeds.split(",")):  # every strategy once before any twice
            for label, flags in configs:
                compare(run(label, flags, seed))
    print(table([c[0] for c in configurations()]))


def digits(args: argparse.Namespace) -> None:
    """The benchmark on real data: inputs fixed first, every configuration per seed, the drift last."""
    import fidelity_digits as fd

    global OUT
    if args.refit_threads:  # no new measurement: the same runs, the same samples, the fit per batch size
        source, OUT = OUT, OUT.parent / args.refit_threads
        # a step's parallel fraction only matters on a worker of several cores (here leader-fusion's fused
        # one): all 21 runs judged again on 2026-12-07 came out identical but for those
        judge_copies(source, fd.refit_threads(source, OUT), only_multicore=True)
        print(table([c[0] for c in configurations()]))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    configs = [c for c in configurations() if not args.only or c[0] in args.only.split(",")]
    if not args.table:
        JUDGED_SET[:] = fd.fixed_inputs(OUT, SHIPPED_CALIBRATION, hetune, calibrate_steps, run)
        for seed in seeds:  # every configuration once before any twice
            for label, flags in configs:
                compare(run(label, flags, seed))
        if all((OUT / "runs" / f"{label}-s{s}" / "fidelity.json").is_file()  # the last judged run is done
               for label, _ in configurations() for s in fd.JUDGED_SEEDS):
            (OUT / "drift.json").write_text(json.dumps(fd.drift_after(OUT, calibrate_steps), indent=1) + "\n")
    print(table([c[0] for c in configurations()]))


if __name__ == "__main__":
    main()
