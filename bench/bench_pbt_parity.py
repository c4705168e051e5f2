"""PBT parity: Ray Tune's own PopulationBasedTraining against the simulator's PBT, on one learning model.

    python bench/bench_pbt_parity.py                       # every setting, 500 seeds each
    python bench/bench_pbt_parity.py --seeds 60 --settings A-pop4 E-synch --out /tmp/parity
    python bench/bench_pbt_parity.py --real 5              # also Ray Tune for real (validate --plain)

(a) Ray's PopulationBasedTraining class, driven by a stand-in for Tune's controller on a simulated clock
(real/pbt_standin.py), against the simulator's tune-default (plain Ray Tune PBT), on the default
experiment's learning model (the noisy quadratic model) and an 8 x V100 cluster, for each setting and
seed; per run: iterations to the target, its time, exploits per trial, best final accuracy (see
real/pbt_parity.py). Permutation tests (valid on discrete, tied data), Holm's correction across every
test of the run at a family-wise 5%, effect sizes beside the p-values.

(b) ``--real N``: N seeds of two small settings run by Ray Tune for real (``hetune validate --plain`` on
the model trainable, an emulated 4-slot CPU cluster), each compared with the simulator's and the
stand-in's distributions for the same setting (``--real-seeds-sim`` seeds each).

Targets (issue "The learning model fitted and checked", item 2): no test rejects after the correction at
500 seeds per setting; medians of iterations to the target within 5%.
Bad input (``--set`` outside what Ray accepts, an unknown setting): one line naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
CLUSTER = REPO / "configs/clusters/v100x8.toml"
# budget mode: every trial trains to its stop iteration, so the best final accuracy means the same in both
BASE = [f"cluster.path={CLUSTER}", "experiment.budget_s=1000000000"]
SETTINGS: dict[str, tuple[str, list[str]]] = {
    "A-pop4": ("population 4 on 8 GPUs, quantile 0.25, resample 0.25, iterations, async",
               ["experiment.population=4"]),
    "B-pop8-q50-r100": ("population 8, quantile 0.5, resample 1, iterations, async",
                        ["experiment.population=8", "pbt.quantile_fraction=0.5", "pbt.resample_probability=1.0"]),
    "C-pop16": ("population 16 on 8 GPUs (pauses), quantile 0.25, resample 0.25, iterations, async",
                ["experiment.population=16"]),
    "D-pop32-time": ("population 32 on 8 GPUs, time_total_s every 10 s (between evaluations), async",
                     ["experiment.population=32", 'pbt.time_attr="time_total_s"', "pbt.perturbation_interval=10"]),
    "E-pop8-synch": ("population 8, synchronous, iterations",
                     ["experiment.population=8", "pbt.synch=true"]),
    "F-pop16-q50-time-synch": ("population 16 on 8 GPUs, quantile 0.5, time_total_s every 10 s, synchronous",
                               ["experiment.population=16", "pbt.quantile_fraction=0.5", 'pbt.time_attr="time_total_s"',
                                "pbt.perturbation_interval=10", "pbt.synch=true"]),
}
# (b): Ray Tune for real on this host: the smoke experiment's scale, the model trainable sleeping the
# calibrated step times, 4 one-core slots of one emulated device type
REAL_EXP = REPO / "configs/experiments/smoke-local.toml"
REAL_BASE = ['real.trainable="model"', "real.model_sleep=1", 'learning.kind="nqm"', "experiment.stop_iterations=60",
             "experiment.budget_s=1000000000", "experiment.target_accuracy=0.3",
             "strategies.tune-default.cpus_per_trial=1", f"cluster.path={REPO / 'configs/clusters/local-4slots.toml'}"]
REAL_SETTINGS: dict[str, tuple[str, list[str]]] = {
    "R1-pop3": ("population 3 on 4 slots, quantile 0.25, iterations every 10, async", ["experiment.population=3"]),
    # more trials than slots: every perturbation point pauses trials and Tune restages them one at a
    # time, the rule that moved tune-default's simulated numbers most
    "R2-pop6": ("population 6 on 4 slots (pauses and restaging), quantile 0.25, iterations every 10, async",
                ["experiment.population=6"]),
}


def _inputs(exp: Path, overrides: list[str]):
    from hetune.sim.loader import load_inputs

    return load_inputs(exp, overrides)


def _batch(job: tuple[str, list[str], str, list[int]]) -> list[dict]:
    """Outcomes of one engine for a list of seeds (run in a worker process)."""
    exp, overrides, engine, seeds = job
    from hetune.real.pbt_parity import sim_outcome, standin_outcome

    inputs = _inputs(Path(exp), overrides)
    run = standin_outcome if engine == "ray" else sim_outcome
    return [asdict(run(inputs, s)) for s in seeds]


def _outcomes(exp: Path, overrides: list[str], seeds: int, jobs: int, pool: ProcessPoolExecutor,
              first: int = 0) -> dict[str, list]:
    from hetune.real.pbt_parity import Outcome

    chunk = max(1, math.ceil(seeds / (4 * jobs)))
    out = {}
    for engine in ("ray", "sim"):
        parts = [(str(exp), overrides, engine, list(range(first + i, first + min(seeds, i + chunk))))
                 for i in range(0, seeds, chunk)]
        out[engine] = [Outcome(**o) for batch in pool.map(_batch, parts) for o in batch]
    return out


def _check(exp: Path, overrides: list[str], where: str) -> None:
    """Refuse what the experiment loader or Ray's PopulationBasedTraining would refuse, in one line."""
    from ray.tune.schedulers import PopulationBasedTraining

    from hetune.real.tune_args import pbt_kwargs
    from hetune.sim.errors import ConfigError

    try:
        inputs = _inputs(exp, overrides)
        PopulationBasedTraining(log_config=False, **pbt_kwargs(inputs.experiment))
    except ConfigError as exc:
        raise SystemExit(_fail(f"{where}: {exc}"))
    except (ValueError, TypeError) as exc:
        raise SystemExit(_fail(f"{where}: Ray's PopulationBasedTraining refuses these settings: {exc}"))


def _fail(line: str) -> int:
    print(f"bench_pbt_parity: {line}", file=sys.stderr)
    return 2


def _validate(run: Path, seed: int, overrides: list[str]) -> Path:
    """One real Ray Tune run (validate --plain, tune-default, the model trainable) into ``run``."""
    cmd = [sys.executable, "-m", "hetune.cli", "validate", str(REAL_EXP), "--strategy", "tune-default", "--plain",
           "--seed", str(seed), "--out", str(run), "--quiet", "--force", *[x for o in overrides for x in ("--set", o)]]
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return run


def _real_outcomes(name: str, overrides: list[str], seeds: int, scratch: Path) -> list:
    """``seeds`` runs of Ray Tune for real, their outcomes."""
    from hetune.real.pbt_parity import real_outcome

    return [real_outcome(_validate(scratch / f"{name}-s{seed}", seed, overrides)) for seed in range(seeds)]


def _model_calibration(scratch: Path, out: Path) -> Path:
    """The local calibration with the model trainable's own actor overheads, from one real run (seed 1000,
    not a judged seed): a model trainable imports no torch, so its actors start in about a second where
    the network trainable's calibrated ones take three. Start: first result minus its compute; restart:
    the lower quartile of the gaps from a trial's pause to the end of its next resume (a trial waits on
    longer when Tune restages another first)."""
    import tomllib

    import tomli_w

    from hetune.sim.events import read_events

    run = _validate(scratch / "calibration-run", 1000, REAL_BASE + REAL_SETTINGS["R1-pop3"][1])
    events = read_events(run / "events.jsonl")
    starts = [e["t"] for e in events if e["kind"] == "trial_start"]
    gaps, paused = [], {}
    for e in events:
        if e["kind"] == "pause":
            paused[e["trial"]] = e["t"]
        elif e["kind"] == "resume" and e["trial"] in paused:
            gaps.append(e["t"] - paused.pop(e["trial"]))
    data = tomllib.loads((REPO / "configs/calibration/local.toml").read_text())
    row = data["models"]["resnet18"]["cpu-fast"]
    row["start_overhead_s"] = round(sorted(starts)[len(starts) // 2], 3)
    if gaps:
        row["resume_s"] = round(sorted(gaps)[len(gaps) // 4], 3)
    data.setdefault("provenance", {})["model_trainable_overheads"] = (
        f"start_overhead_s, resume_s of cpu-fast from a real run of the model trainable (bench_pbt_parity.py, "
        f"seed 1000): {len(starts)} starts, {len(gaps)} restarts")
    out.write_text(tomli_w.dumps(data))
    return out


def _table(rows: list[dict]) -> str:
    lines = ["| setting | metric | test | statistic | p | Holm | Ray | sim | sim - Ray | % | mean Ray / sim |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]

    def f(x: float | None, d: int = 3) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"

    for r in rows:
        lines.append(f"| {r['setting']} | {r['metric']} | {r['test']} | {f(r['statistic'])} | {f(r['p_value'])} | "
                     f"{'REJECTED' if r['rejected'] else 'kept'} | {f(r['ray'])} | {f(r['sim'])} | {f(r['effect'])} | "
                     f"{f(r['effect_pct'], 1)} | "
                     f"{'-' if r.get('ray_mean') is None else f(r['ray_mean'], 1) + ' / ' + f(r['sim_mean'], 1)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1 (a "
                    "confirmatory run on fresh seeds)")
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS))
    ap.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                    help="applied to every setting, after it")
    ap.add_argument("--permutations", type=int, default=4000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--real", type=int, default=0, help="seeds of Ray Tune for real per real setting (0: none)")
    ap.add_argument("--real-seeds-sim", type=int, default=200)
    ap.add_argument("--out", type=Path, default=REPO / "results/pbt-parity")
    ap.add_argument("--from-outcomes", nargs="+", type=Path, metavar="OUTCOMES_JSON",
                    help="run nothing: test again the outcomes.json of earlier runs (a later file's setting "
                         "replaces an earlier one's), copying their inputs/ folders")
    args = ap.parse_args(argv)
    from hetune.real.provenance import this_host

    if args.from_outcomes:
        return _recompute(args)

    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        return _fail(f"--settings: unknown setting {unknown[0]!r} (known: {', '.join(SETTINGS)})")
    if args.seeds < 2 or args.permutations < 100:
        return _fail("--seeds must be >= 2 and --permutations >= 100")
    plan = {n: (EXP, BASE + SETTINGS[n][1] + args.overrides, SETTINGS[n][0]) for n in args.settings}
    for name, (exp, overrides, _) in plan.items():
        _check(exp, overrides, f"setting {name}")
    t0 = time.time()
    rows: list[dict] = []
    runs: dict[str, dict] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    inputs_dir = args.out / "inputs"
    inputs_dir.mkdir(exist_ok=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool, tempfile.TemporaryDirectory() as scratch:
        if args.real:  # calibrated before the judged runs, from a run of its own
            calib = _model_calibration(Path(scratch), inputs_dir / "local-model-trainable.toml")
            plan.update({n: (REAL_EXP, REAL_BASE + o + [f"calibration.path={calib}"] + args.overrides, d)
                         for n, (d, o) in REAL_SETTINGS.items()})
        for name, (exp, overrides, desc) in plan.items():
            real = name in REAL_SETTINGS
            seeds = args.real_seeds_sim if real else args.seeds
            out = _outcomes(exp, overrides, seeds, args.jobs, pool, 0 if real else args.first_seed)
            if real:
                out["tune"] = _real_outcomes(name, overrides, args.real, Path(scratch))
            portable = [o.replace(f"{REPO}/", "").replace(f"{args.out}/", "") for o in overrides]
            runs[name] = {"description": desc, "overrides": portable,
                          **{k: [asdict(o) for o in v] for k, v in out.items()}}
            print(f"{name}: {seeds} seeds, {time.time() - t0:.0f} s", file=sys.stderr)
    rows = _rows(runs, args.permutations)
    shipped = [EXP, CLUSTER, REPO / "configs/calibration/reference.toml"]
    if args.real:
        shipped += [REAL_EXP, REPO / "configs/clusters/local-4slots.toml", REPO / "configs/clusters/local.toml",
                    REPO / "configs/calibration/local.toml"]
    for f in shipped:
        shutil.copy2(f, inputs_dir / f.name)
    meta = {"command": _command(argv), "host": this_host(), "seeds": args.seeds, "first_seed": args.first_seed,
            "permutations": args.permutations, "wall_s": round(time.time() - t0, 1)}
    _write_results(args.out, meta, rows, runs)
    return 0


def _command(argv: list[str] | None) -> str:
    return "python bench/bench_pbt_parity.py " + " ".join(argv if argv is not None else sys.argv[1:])


def _rows(runs: dict[str, dict], permutations: int) -> list[dict]:
    """Every test of every setting (Ray against the simulator; for real settings, Ray Tune for real against
    each engine), Holm's correction across all of them at a family-wise 5%."""
    from hetune.real.pbt_parity import Outcome, as_row, compare
    from hetune.sim.permutation import holm

    def outcome(o: dict) -> Outcome:  # seconds to the millisecond, as recorded since (pbt_parity._first_reach)
        return Outcome(**{k: round(v, 3) if k in ("time_s", "makespan_s") and math.isfinite(v) else v
                          for k, v in o.items()})

    rows: list[dict] = []
    for name, run in runs.items():
        out = {k: [outcome(o) for o in run[k]] for k in ("ray", "sim", "tune") if k in run}
        for c in compare(out["ray"], out["sim"], permutations, seed=len(rows)):
            rows.append(as_row(name, c))
        if "tune" in out:
            for other in ("sim", "ray"):  # real Ray Tune against each engine's distribution
                for c in compare(out["tune"], out[other], permutations, seed=len(rows)):
                    rows.append({**as_row(f"{name} real-vs-{other}", c), "ray_is": "Ray Tune for real"})
    for r, rej in zip(rows, holm([r["p_value"] for r in rows], 0.05)):
        r["rejected"] = rej
    return rows


def _write_results(out: Path, meta: dict, rows: list[dict], runs: dict[str, dict]) -> None:
    meta = {**meta, "family_wise_alpha": 0.05, "tests": len(rows), "rejected": sum(r["rejected"] for r in rows)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (out / "outcomes.json").write_text(json.dumps(runs) + "\n")
    head = (f"{meta['command']}\nhost {meta['host'].get('host', '?')}, {meta['seeds']} seeds per setting, "
            f"{meta['permutations']} permutations, Holm at a family-wise 5% over {meta['tests']} tests: "
            f"{meta['rejected']} rejected; {meta['wall_s']} s\n\n")
    (out / "table.md").write_text(head + _table(rows) + "\n")
    print(head + _table(rows))


def _recompute(args: argparse.Namespace) -> int:
    """--from-outcomes: the tests again on recorded outcomes, nothing run."""
    runs: dict[str, dict] = {}
    metas = []
    for f in args.from_outcomes:
        try:
            runs.update(json.loads(f.read_text()))
            metas.append(json.loads((f.parent / "table.json").read_text())["meta"])
        except (OSError, ValueError, KeyError) as exc:
            return _fail(f"--from-outcomes: {f}: not the outcomes.json of a run ({type(exc).__name__}: {exc})")
        src = f.parent / "inputs"
        if src.is_dir() and src.resolve() != (args.out / "inputs").resolve():
            shutil.copytree(src, args.out / "inputs", dirs_exist_ok=True)
    t0 = time.time()
    rows = _rows(runs, args.permutations)
    meta = {"command": _command(None), "recomputed_from": [m["command"] for m in metas], "host": metas[-1]["host"],
            "seeds": metas[0]["seeds"], "first_seed": metas[0].get("first_seed", 0),
            "permutations": args.permutations, "wall_s": round(sum(m["wall_s"] for m in metas) + time.time() - t0, 1)}
    _write_results(args.out, meta, rows, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
