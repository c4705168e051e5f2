"""Recovery of the skills model's parameters on data it generated (issue "A learning model fitted to real
training", target: each identified parameter inside its 95% interval in at least 90% of at least 80 cases,
in under 30 minutes).

    python bench/bench_skills_recovery.py [--cases 80] [--form share] [--likelihood gls|ols]

The design is the digits one (results/digits/1000-drop700: lr 0.003, 0.01, 0.03 constant and 0.03 dropped
10x at 700, 3 seeds, a reading every 50 iterations up to 1,000). The truth is the fit of those 12 runs
(fit B of bench/bench_skills_digits.py). Each case generates every run with the model's noise (the runs of
one seed share its reading term, as real runs of one seed do), fits them, and checks, for every parameter
the fit calls identified, whether its 95% interval holds the truth.
Writes results/skills-digits/recovery-<likelihood>.json.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from hetune.calibrate.curves_io import digits_runs
from hetune.calibrate.skills_fit import FitSettings, fit, sample_readings
from hetune.sim.skills import Skills, SkillsParams

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results/skills-digits"


def main(argv: list[str]) -> None:
    cases = int(argv[argv.index("--cases") + 1]) if "--cases" in argv else 80
    form = argv[argv.index("--form") + 1] if "--form" in argv else "share"
    likelihood = argv[argv.index("--likelihood") + 1] if "--likelihood" in argv else "gls"
    settings = FitSettings(likelihood=likelihood, rate_max=1.0)  # as recorded
    design = digits_runs(REPO / "results/digits/1000-drop700/runs.json")
    truth = fit(design, SkillsParams(floor=form), settings).params
    t0 = time.perf_counter()
    inside: dict[str, list[bool]] = {}
    rmse = []
    for case in range(cases):
        curves = []
        for seed in sorted({c.seed for c in design}):
            model = Skills(truth, design[0].batch, FitSettings().eval_samples).for_run(10_000 + case * 10 + seed)
            rng = np.random.default_rng([case, seed])
            for c in (c for c in design if c.seed == seed):
                y = sample_readings(model, c, rng)
                curves.append(replace(c, readings=tuple((i, float(v)) for (i, _), v in zip(c.readings, y))))
        r = fit(curves, SkillsParams(floor=form), settings)
        rmse.append(r.rmse)
        for name, (lo, hi) in r.intervals.items():
            if name not in r.unidentified:
                inside.setdefault(name, []).append(bool(lo <= getattr(truth, name) <= hi))
        print(f"case {case}: {sum(v[-1] for v in inside.values() if v)} of {len(inside)} parameters' intervals hold "
              f"the truth ({time.perf_counter() - t0:.0f} s)", flush=True)
    table = {n: {"identified_in": len(v), "inside": int(sum(v)), "share": round(sum(v) / len(v), 3)}
             for n, v in sorted(inside.items())}
    out = {"cases": cases, "form": form, "likelihood": likelihood, "seconds": round(time.perf_counter() - t0),
           "truth": {k: (v if isinstance(v, str) else float(v)) for k, v in truth.__dict__.items()},
           "fit_rmse_median": round(float(np.median(rmse)), 4), "parameters": table}
    (OUT / f"recovery-{likelihood}.json").write_text(json.dumps(out, indent=1) + "\n")
    for n, v in table.items():
        mark = "met" if v["share"] >= 0.9 and v["identified_in"] >= 80 else "missed"
        print(f"{n:18s} identified in {v['identified_in']:3d} of {cases} cases, inside {v['share']:.1%} ({mark})")


if __name__ == "__main__":
    main(sys.argv[1:])
