"""The judged real-PBT accuracy benchmark (issue "Accuracy predictions checked against real PBT runs",
item 1): what is fixed before the first judged run, the runs in resumable parts, and the table.

``freeze`` writes results/pbt-accuracy/judged/design.json once (a second call returns it unchanged):
- **seeds per arm**: ``ceil(7 (s / 0.065)^2)`` within [7, 10], where ``s`` is the pooled standard deviation,
  over the design runs' configurations (lr and schedule; 3 seeds each), of each run's best reading up to
  the budget: the issue's 7 seeds at a spread of 6.5 points, scaled with the variance; never fewer than 7,
  because the design runs are single trials and the 6.5 points were measured on whole PBT runs (the
  committed digits fidelity runs), whose spread a single trial's does not bound;
- **budget**: the experiment's stop iteration (600): every trial trains to it, best accuracy is the run's;
- **target**: the median, over the design's constant runs, of the middle of each one's climb (its first
  reading and the mean of its last two readings up to the budget), to 0.01;
- **arms**: Ray Tune's own PBT (``tune-default --plain``) and random search at every seed, paired by
  seed; rank-aware (a hetune strategy) at the first 3 seeds if time allows (run last);
- the learning file (configs/learning/digits-skills.toml) by its sha-256, and what it was fitted from.

``part(hours)`` first measures the cluster's step times under load on this host (``calibration.toml``, once,
before the first judged run; every run names it), then runs the missing (arm, seed) runs in order until
``hours`` have passed (a run started is finished; an interrupted one is resumed with ``--resume``), each
compared with 200 simulated seeds.
``table()`` refuses, in one line naming the run, a run whose frozen learning model or experiment differs
from the design's, or a learning file fitted from a judged run; then writes table.md and table.json.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from accuracy_judgement import gap_verdict, paired_gap, record, summary
from bench_fidelity import hetune

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results/pbt-accuracy/judged"
EXPERIMENT = "configs/experiments/pbt-accuracy-digits.toml"
FIT = "configs/learning/digits-skills.toml"
DESIGN_RUNS = ("results/digits/1000-drop700/runs.json", "results/digits/600-drop300/runs.json")
ARMS = {"tune-default-plain": ["--strategy", "tune-default", "--plain"],
        "random-search": ["--strategy", "random-search"], "rank-aware": ["--strategy", "rank-aware"]}
THIRD_ARM_SEEDS = 3
SIM_SEEDS = 200
FROZEN_FIELDS = ("population", "stop_iterations", "batch_size", "eval_samples", "checkpoint_interval", "model",
                 "dataset")


def _design_readings(budget: int) -> list[tuple[tuple, list[tuple[int, float]]]]:
    """(configuration, seed) and readings up to ``budget`` of every design run, each run once (read as
    ``calibrate curves`` reads them: the 600-iteration design's constants repeat the 1,000-iteration ones)."""
    from hetune.calibrate.skills_curves import read_curves

    return [((c.run.rsplit("-s", 1)[0], c.seed), [(i, a) for i, a in c.readings if i <= budget])
            for c in read_curves([str(REPO / p) for p in DESIGN_RUNS])]


def freeze() -> dict[str, Any]:
    path = OUT / "design.json"
    if path.is_file():
        return json.loads(path.read_text())
    exp = tomllib.loads((REPO / EXPERIMENT).read_text())["experiment"]
    budget = int(exp["stop_iterations"])
    runs = _design_readings(budget)
    groups: dict[tuple, list[float]] = {}
    for key, reads in runs:
        groups.setdefault(key[0], []).append(max(a for _, a in reads))
    pooled = math.sqrt(statistics.fmean(statistics.variance(v) for v in groups.values() if len(v) > 1))
    seeds = min(10, max(7, math.ceil(7 * (pooled / 0.065) ** 2)))
    middles = [(reads[0][1] + (reads[-1][1] + reads[-2][1]) / 2) / 2 for key, reads in runs
               if key[0].startswith("const")]
    fit_text = (REPO / FIT).read_text()
    design = {"experiment": EXPERIMENT, "budget_iterations": budget,
              "target_accuracy": round(statistics.median(middles), 2), "seeds": seeds,
              "design_spread": round(pooled, 4), "design_runs": list(DESIGN_RUNS),
              "arms": {a: list(range(seeds if a != "rank-aware" else min(THIRD_ARM_SEEDS, seeds))) for a in ARMS},
              "learning_file": FIT, "learning_sha256": hashlib.sha256(fit_text.encode()).hexdigest(),
              "learning_fitted_from": tomllib.loads(fit_text)["fit"].get("inputs", []),
              "experiment_fields": {k: exp[k] for k in FROZEN_FIELDS}, "simulated_seeds": SIM_SEEDS,
              "rule": (__doc__ or "").split("\n\n")[1].strip()}
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(design, indent=1) + "\n")
    tmp.replace(path)
    return design


def part(hours: float) -> None:
    """Judged runs in the design's order (paired seeds first, the third arm last) until ``hours`` pass."""
    design = json.loads((OUT / "design.json").read_text())  # freeze() first: refused otherwise
    t_end = time.time() + hours * 3600
    cal = OUT / "calibration.toml"
    if not cal.is_file():
        hetune("calibrate", "--cluster", "configs/clusters/local-2slots.toml", "--models", "resnet18",
                "--batch-sizes", "8", "--steps", "5", "--under-load", "--quiet", "--out", str(cal.relative_to(REPO)))
    order = [(a, s) for s in design["arms"]["tune-default-plain"] for a in ("tune-default-plain", "random-search")]
    order += [("rank-aware", s) for s in design["arms"]["rank-aware"]]
    for arm, seed in order:
        folder = OUT / "runs" / f"{arm}-s{seed}"
        if (folder / "fidelity.json").is_file():
            continue
        if time.time() > t_end:
            print(f"part over: {folder.name} and later runs are for the next part", flush=True)
            return
        if not (folder / "summary.json").is_file():
            resume = ["--resume"] if (folder / "events.partial.jsonl").is_file() else []
            hetune("validate", EXPERIMENT, *ARMS[arm], "--seed", str(seed), "--out", str(folder.relative_to(REPO)),
                    "--quiet", "--set", f"experiment.target_accuracy={design['target_accuracy']}",
                    "--set", f"calibration.path={cal.relative_to(REPO)}", *resume)
        hetune("compare", str(folder.relative_to(REPO)), "--seeds", str(design["simulated_seeds"]))


def check_runs(design: dict[str, Any], runs: list[Path]) -> None:
    """SystemExit in one line naming the first run whose frozen inputs differ from the design's, or the
    learning file if a judged run was among what it was fitted from."""
    for src in design["learning_fitted_from"]:
        if "pbt-accuracy/judged" in src:
            sys.exit(f"bench_pbt_accuracy: {design['learning_file']} was fitted from a judged run ({src})")
    fit = tomllib.loads((REPO / design["learning_file"]).read_text())["learning"]["params"]
    for run in runs:
        cfg = tomllib.loads((run / "config.toml").read_text())
        exp, learning = cfg["experiment"], cfg.get("learning", {})
        diff = [k for k, v in design["experiment_fields"].items() if exp.get(k) != v]
        if exp.get("target_accuracy") != design["target_accuracy"]:
            diff.append("target_accuracy")
        if learning.get("kind") != "skills" or any(learning.get("params", {}).get(k) != v for k, v in fit.items()):
            diff.append("learning")
        if diff:
            sys.exit(f"bench_pbt_accuracy: {run.relative_to(REPO) if run.is_relative_to(REPO) else run}: its frozen "
                     f"inputs differ from the design's ({', '.join(diff)}); it cannot be judged here")


def table() -> str:
    design = json.loads((OUT / "design.json").read_text())
    runs = sorted(p for p in (OUT / "runs").glob("*-s*") if (p / "fidelity.json").is_file())
    check_runs(design, runs)
    recs = {p.name: record(json.loads((p / "fidelity.json").read_text())) for p in runs}
    arms: dict[str, dict[int, dict]] = {}
    for name, r in recs.items():
        arm, seed = name.rsplit("-s", 1)
        arms.setdefault(arm, {})[int(seed)] = r
    out: dict[str, Any] = {"design": design, "per_arm": {a: summary(list(v.values())) for a, v in arms.items()}}
    lines = [f"{len(recs)} judged runs of the {sum(len(v) for v in design['arms'].values())} planned",
             "", "| arm | runs | inside 95% | mean percentile | CRPS | simulated width | real spread |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    if recs:
        out["pooled"] = summary(list(recs.values()))
    for a, s in list(out["per_arm"].items()) + ([("pooled", out["pooled"])] if recs else []):
        spread = f"{s['real_spread']:.3f}" if s["real_spread"] is not None else "n/a"
        lines.append(f"| {a} | {s['runs']} | {s['inside']:.0%} | {s['mean_percentile']:.2f} | {s['crps']:.4f} | "
                     f"{s['sim_width']:.3f} | {spread} |")
    if "tune-default-plain" in arms and "random-search" in arms and set(arms["tune-default-plain"]) & set(
            arms["random-search"]):
        g = paired_gap(arms["tune-default-plain"], arms["random-search"])
        out["pbt_minus_random_search"] = dict(g, verdict=gap_verdict(g))
        lines += ["", f"Ray's PBT minus random search, paired over seeds {g['seeds']}: real {g['real_mean']:+.3f} "
                      f"(se {g['real_se']}), simulated {g['sim_mean']:+.3f} (se {g['sim_se']}): {gap_verdict(g)}"]
    (OUT / "table.json").write_text(json.dumps(out, indent=1) + "\n")
    md = "\n".join(lines) + "\n"
    (OUT / "table.md").write_text(md)
    return md
