"""Parameter recovery of the learning-model fit (``hetune calibrate curves --kind nqm``).

    python bench/bench_nqm_fit.py                      # 50 generated cases
    python bench/bench_nqm_fit.py --cases 10 --out /tmp/nqm-fit

Each case draws true parameters around the default experiment's (calibrate/nqm_recovery.py
``perturbed``), generates the design the fit asks for (three constant-lr runs, one run with a 10x lr
drop half way; 1,000 iterations at batch 512, a reading every 50 on ``--eval-samples`` images, with
the model's own reading noise and seed luck, and a training loss with 5% log-normal noise), fits
it from the default experiment's parameters, and checks whether each parameter the fit called
identified lies inside its reported 95% interval (profile likelihood).

Target (issue "The learning model fitted and checked", item 4): each identified parameter within its
reported interval in at least 90% of generated cases.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
LRS, DROP_LR = [0.05, 0.15, 0.5], 0.5
TARGET = 0.9


def one_case(args: tuple[int, int, bool]) -> dict:
    from hetune.calibrate.nqm_fit import fit_nqm
    from hetune.calibrate.nqm_recovery import design_histories, perturbed
    from hetune.sim.loader import load_inputs

    case, eval_samples, loss = args
    prior = load_inputs(EXP).experiment.learning.nqm
    rng = np.random.default_rng(10_000 + case)
    true = perturbed(prior, rng)
    data = design_histories(true, 512, LRS, DROP_LR, 1000, 50, eval_samples, rng,
                            loss=(0.05, 2.3, 0.05) if loss else None)
    t0 = time.perf_counter()
    fit = fit_nqm(data, prior, eval_samples, use_loss=loss, seed=case)
    rows = {}
    for name, row in fit["table"].items():
        truth = getattr(true, name, None)
        if truth is None:  # the loss map's terms: generated as (0.05, 2.3)
            truth = {"loss_floor": 0.05, "loss_scale": 2.3}[name]
        inside = row.get("low") is not None and row["low"] <= truth <= row["high"]
        rows[name] = {**row, "true": truth, "inside": bool(inside)}
    return {"case": case, "seconds": round(time.perf_counter() - t0, 2), "rows": rows,
            "noise_std": [true.noise_std, fit["noise_std"]], "seed_std": [true.seed_std, fit["seed_std"]]}


def summarize(cases: list[dict]) -> list[dict]:
    names = list(cases[0]["rows"])
    out = []
    for n in names:
        ident = [c["rows"][n] for c in cases if c["rows"][n]["identified"]]
        inside = sum(r["inside"] for r in ident)
        ratio = [r["high"] / r["low"] for r in ident if n != "max_accuracy" and r["low"]]
        out.append({"parameter": n, "identified": len(ident), "cases": len(cases), "inside": inside,
                    "coverage": inside / len(ident) if ident else None,
                    "median_interval": (float(np.median(ratio)) if ratio else
                                        float(np.median([r["high"] - r["low"] for r in ident])) if ident else None)})
    return out


def table_md(summary: list[dict], meta: dict) -> str:
    lines = [f"Generated cases: {meta['cases']}, eval_samples "
             f"{meta['eval_samples']}, loss readings {'on' if meta['loss'] else 'off'}; host {meta['host']}, "
             f"{meta['seconds']:.0f} s.", "",
             "| parameter | identified in | inside its 95% interval | coverage | target | median interval |",
             "|---|---|---|---|---|---|"]
    for r in summary:
        cov = "n/a" if r["coverage"] is None else f"{r['coverage']:.0%}"
        met = "" if r["coverage"] is None else (" (met)" if r["coverage"] >= TARGET else " (missed)")
        width = ("n/a" if r["median_interval"] is None else
                 f"{r['median_interval']:.3f} wide" if r["parameter"] == "max_accuracy" else
                 f"x{r['median_interval']:.2f}")
        lines.append(f"| {r['parameter']} | {r['identified']}/{r['cases']} | {r['inside']} | {cov}{met} | "
                     f">= {TARGET:.0%} | {width} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=50)
    ap.add_argument("--eval-samples", type=int, default=2000)
    ap.add_argument("--no-loss", action="store_true", help="accuracy readings only")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "results/nqm-fit"))
    a = ap.parse_args(argv)
    if a.cases < 1 or a.eval_samples < 1:
        print("bench_nqm_fit: --cases and --eval-samples must be >= 1", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.workers) as pool:
        cases = list(pool.map(one_case, [(c, a.eval_samples, not a.no_loss) for c in range(a.cases)]))
    meta = {"cases": a.cases, "eval_samples": a.eval_samples, "loss": not a.no_loss,
            "host": platform.node(), "seconds": time.perf_counter() - t0,
            "command": "python bench/bench_nqm_fit.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    summary = summarize(cases)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases.json").write_text(json.dumps({"meta": meta, "summary": summary, "cases": cases}, indent=1) + "\n")
    (out / "table.md").write_text(table_md(summary, meta))
    print(table_md(summary, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
