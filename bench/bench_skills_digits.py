"""The skills model's digits schedule hold-out (issue "A learning model fitted to real training", targets).

    python bench/bench_skills_digits.py --form share   # fits A, B and constants-only; scores; writes the folder
    python bench/bench_skills_digits.py --insample     # the constant runs' own fit only (no hold-out scored)
    python bench/bench_skills_digits.py --all          # every form fitted on all 15 runs: can a form follow
                                                       # both drops at once? (in-sample, no hold-out)

Each form of the model (``FORMS``: "logit", the first, scored at 6e00135; "share", the second;
"gated", the third: the share floor with the hard skill learned on top of the easy one; each committed
before it was scored) is scored on the same protocol and kept in scores.json.

Protocol (frozen with the model form and sim/skills.py's priors, calibrate/skills_fit.py's settings,
before any hold-out was scored): the 9 constant runs are those of results/digits/1000-drop700 (the
600-iteration design's constants are their prefixes, reading for reading).
- fit A: the 9 constant runs plus the 3 drop-at-300 runs; predicts drop-at-700.
- fit B: the 9 constant runs plus the 3 drop-at-700 runs; predicts drop-at-300.
- fit C: the 9 constant runs alone; predicts both (reported, no target).
Scored on the expected curve: RMSE, over the evaluations after the switch, between the prediction and
the held-out drop's mean over its 3 seeds (target <= 0.6x the baseline's: <= 0.050 at 700, <= 0.038 at
300); also the RMSE on single readings. Baseline: at each of those evaluations, the mean over seeds of
the constant lr 0.03 readings. Gain: prediction of (drop - constant 0.03) on the mean of the last three
evaluations, against the real mean gain (sign must agree).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import tomli_w

from hetune.calibrate.curves_io import digits_runs
from hetune.calibrate.skills_fit import Curve, FitSettings, coverage, expected, fit, params_table
from hetune.sim.skills import Skills, SkillsParams

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results/skills-digits"
# the forms scored, in order: each a SkillsParams prior (sim/skills.py's defaults otherwise)
FORMS: dict[str, dict] = {"logit": {"floor": "logit"}, "share": {"floor": "share"},
                          "gated": {"floor": "share", "hard_after_easy": True}}


def design() -> dict[str, list[Curve]]:
    long = digits_runs(REPO / "results/digits/1000-drop700/runs.json")
    short = digits_runs(REPO / "results/digits/600-drop300/runs.json", kinds=("drop",))
    return {"const": [c for c in long if c.run.startswith("const")],
            "drop700": [c for c in long if c.run.startswith("drop")], "drop300": short}


def score(params, held: list[Curve], const: list[Curve]) -> dict:
    """The hold-out scores of ``params`` on the drop runs ``held`` (see the module docstring)."""
    switch = held[0].segments[0][2]
    model = Skills(params, held[0].batch, 0)
    pred = expected(model, held[0])  # the expected curve: the same for every seed
    its = np.array([i for i, _ in held[0].readings])
    after = its > switch
    real = np.array([[a for _, a in c.readings] for c in held])
    c03 = [c for c in const if c.segments[0][0] == held[0].segments[0][0]]
    n = len(its)
    base = np.array([[a for _, a in c.readings][:n] for c in c03]).mean(axis=0)
    pred_const = expected(model, Curve("c", 0, ((held[0].segments[0][0], held[0].segments[0][1], int(its[-1])),),
                                       held[0].readings, held[0].batch))
    rmse = float(np.sqrt(np.mean((pred[after] - real.mean(axis=0)[after]) ** 2)))
    rmse_single = float(np.sqrt(np.mean((pred[after][None, :] - real[:, after]) ** 2)))
    base_rmse = float(np.sqrt(np.mean((base[after] - real.mean(axis=0)[after]) ** 2)))
    gain_pred = float(pred[-3:].mean() - pred_const[-3:].mean())
    gain_real = float(real[:, -3:].mean() - base[-3:].mean())
    return {"switch": int(switch), "rmse_mean": round(rmse, 4), "rmse_single": round(rmse_single, 4),
            "baseline_rmse": round(base_rmse, 4), "target": round(0.6 * base_rmse, 4), "met": rmse <= 0.6 * base_rmse,
            "gain_predicted": round(gain_pred, 4), "gain_real": round(gain_real, 4),
            "gain_sign_right": bool(np.sign(gain_pred) == np.sign(gain_real)),
            "predicted": [round(float(v), 4) for v in pred],
            "real_mean": [round(float(v), 4) for v in real.mean(axis=0)],
            "iterations": [int(i) for i in its]}


def print_insample(label: str, curves: list[Curve], prior: SkillsParams, settings: FitSettings) -> None:
    """Fit ``curves`` and print the in-sample misfit and the parameters (no hold-out is scored)."""
    t0 = time.perf_counter()
    r = fit(curves, prior, settings)
    print(f"{label}: rmse {r.rmse:.4f} over {r.readings} readings, lag-1 {r.residual_lag1:.2f}, not identified "
          f"{r.unidentified}, {time.perf_counter() - t0:.1f} s")
    print(params_table(r.params))


def in_sample_all(d: dict[str, list[Curve]], settings: FitSettings) -> None:
    """Each form fitted on the 9 constants and both drops; its misfit on each drop's mean curve after the
    switch, on the hold-out's measure (stored in scores.json as ``in_sample_all_runs``; no hold-out)."""
    path = OUT / "scores.json"
    out = json.loads(path.read_text())
    res = {}
    for form, prior in FORMS.items():
        t0 = time.perf_counter()
        r = fit(d["const"] + d["drop300"] + d["drop700"], SkillsParams(**prior), settings)
        s = {h: score(r.params, d[h], d["const"]) for h in ("drop300", "drop700")}
        res[form] = {"rmse": round(r.rmse, 4), "not_identified": r.unidentified,
                     "seconds": round(time.perf_counter() - t0, 1),
                     **{h: {k: v[k] for k in ("rmse_mean", "gain_predicted", "gain_real", "predicted")}
                        for h, v in s.items()}}
        print(f"{form}: all 15 runs rmse {r.rmse:.4f}; drop300 mean-curve rmse {s['drop300']['rmse_mean']} gain "
              f"{s['drop300']['gain_predicted']:+.3f}; drop700 {s['drop700']['rmse_mean']} gain "
              f"{s['drop700']['gain_predicted']:+.3f}; not identified {r.unidentified}", flush=True)
    out["in_sample_all_runs"] = {"host": platform.node(), "settings": settings.__dict__, "forms": res}
    path.write_text(json.dumps(out, indent=1) + "\n")


def main(argv: list[str]) -> None:
    d = design()
    form = argv[argv.index("--form") + 1] if "--form" in argv else "share"
    # both forms were scored with independent readings (ols); "share-gls" is the share form with the readings'
    # covariance in the likelihood (calibrate/skills_gls.py), scored after both
    settings = FitSettings(likelihood="gls" if form.endswith("-gls") else "ols", rate_max=1.0)
    form_name, form = form, form.removesuffix("-gls")
    if form not in FORMS:
        sys.exit(f"bench_skills_digits: --form must be one of {', '.join(FORMS)} (optionally -gls), got {form!r}")
    prior = SkillsParams(**FORMS[form])
    if "--all" in argv:
        return in_sample_all(d, settings)
    if "--insample" in argv:
        return print_insample("constants only", d["const"], prior, settings)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "scores.json"
    out = json.loads(path.read_text()) if path.is_file() else {}
    out.setdefault("forms", {})
    this: dict = {"host": platform.node(), "settings": settings.__dict__, "fits": {}}
    plan = {"A": (d["const"] + d["drop300"], ["drop700"]), "B": (d["const"] + d["drop700"], ["drop300"]),
            "C": (d["const"], ["drop700", "drop300"])}
    for name, (curves, held) in plan.items():
        t0 = time.perf_counter()
        r = fit(curves, prior, settings)
        secs = time.perf_counter() - t0
        scores = {h: score(r.params, d[h], d["const"]) for h in held}
        # the fitted runs' readings against the simulated 95% range: noise only, and with the parameter draws
        cover = {"noise": coverage(curves, r.params, None, settings.eval_samples),
                 "noise_and_draws": coverage(curves, r.params, r.uncertainty(), settings.eval_samples)}
        this["fits"][name] = {"fitted_runs": [c.run for c in curves], "seconds": round(secs, 1), "fit": r.table(),
                              "scores": scores, "coverage": cover}
        print(f"{form_name} fit {name}: fitted readings inside the simulated 95% range: noise only "
              f"{cover['noise']['inside']:.1%} (width {cover['noise']['width']:.3f}), with draws "
              f"{cover['noise_and_draws']['inside']:.1%} (width {cover['noise_and_draws']['width']:.3f})", flush=True)
        (OUT / f"fit-{name}-{form_name}.toml").write_text(tomli_w.dumps(
            {"learning": {"kind": "skills", "params": params_table(r.params)}, "fit": r.table()}))
        for h, s in scores.items():
            print(f"{form_name} fit {name} -> {h}: rmse {s['rmse_mean']} (target <= {s['target']}, baseline "
                  f"{s['baseline_rmse']}), single {s['rmse_single']}, gain {s['gain_predicted']:+.3f} vs real "
                  f"{s['gain_real']:+.3f}; fit rmse {r.rmse:.4f}, not identified {r.unidentified}, {secs:.1f} s",
                  flush=True)
    out["forms"][form_name] = this
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
