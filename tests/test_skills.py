"""The skills learning model (sim/skills.py) and its fit (calibrate/skills_fit.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from conftest import REPO
from hetune.calibrate.skills_fit import Curve, FitSettings, expected, fit
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.skills import Skills, SkillsParams, SkillsState

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
# about what the digits constant runs fit (results/skills-digits/): memorisation and a late high-lr skill
DIGITS = SkillsParams(start_logit=-2.1, easy_weight=5.3, easy_rate=0.0058, easy_lr_power=-0.25, hard_weight=2.9,
                      hard_rate=0.00015, hard_lr_power=1.8, memo_weight=2.2, memo_rate=0.0075, memo_temperature=0.136,
                      floor_weight=7.4, floor="logit")


def curve(params: SkillsParams, lr: float, iterations: int = 1000, drop_at: int | None = None) -> list[float]:
    segs = ((lr, 0.9, drop_at), (lr / 10, 0.9, iterations)) if drop_at else ((lr, 0.9, iterations),)
    c = Curve("c", 0, segs, tuple((i, 0.0) for i in range(50, iterations + 1, 50)), 8)
    return list(expected(Skills(params, 8, 0), c))


def test_a_low_constant_lr_peaks_then_falls_while_a_high_one_climbs_late():
    low, high = curve(DIGITS, 0.003), curve(DIGITS, 0.03)
    assert low[2] > high[2] + 0.2  # low lr leads early
    assert max(low) > low[-1] + 0.01  # memorisation: it peaks and falls
    assert high[-1] > max(low) + 0.05  # the high lr ends higher
    assert all(b >= a - 1e-12 for a, b in zip(high, high[1:]))


def test_a_drop_releases_the_floor_at_once_and_keeps_the_high_lr_skill():
    const, drop = curve(DIGITS, 0.03), curve(DIGITS, 0.03, drop_at=700)
    assert drop[:14] == const[:14]
    assert drop[14] > const[14] + 0.05  # one reading after the drop
    model = Skills(DIGITS, 8, 0)
    st = model.advance(SkillsState(), {"lr": 0.03, "momentum": 0.9}, 700)
    after = model.advance(st, {"lr": 0.003, "momentum": 0.9}, 50)
    assert after.hard >= st.hard  # learned, not lost


def test_under_the_share_floor_an_early_drop_gains_less_at_once_than_a_late_one():
    share = replace(DIGITS, floor="share", floor_weight=3.0)
    early = np.subtract(curve(share, 0.03, 600, drop_at=300), curve(share, 0.03, 600))[6]
    late = np.subtract(curve(share, 0.03, 1000, drop_at=700), curve(share, 0.03, 1000))[14]
    logit_early = np.subtract(curve(DIGITS, 0.03, 600, drop_at=300), curve(DIGITS, 0.03, 600))[6]
    logit_late = np.subtract(curve(DIGITS, 0.03, 1000, drop_at=700), curve(DIGITS, 0.03, 1000))[14]
    assert 0 < early < late
    assert early / late < logit_early / logit_late


@pytest.mark.parametrize("gated", [False, True])
def test_chunks_compose_and_divergence_is_for_good(gated):
    model = Skills(replace(DIGITS, hard_after_easy=gated), 8, 0)
    cfg = {"lr": 0.02, "momentum": 0.9}
    one = model.advance(SkillsState(), cfg, 300)
    two = model.advance(model.advance(SkillsState(), cfg, 120), cfg, 180)
    assert one.easy == pytest.approx(two.easy) and one.memo == pytest.approx(two.memo)
    assert one.hard == pytest.approx(two.hard)
    steps = SkillsState()
    for _ in range(300):  # the closed form against one iteration at a time
        steps = model.advance(steps, cfg, 1)
    assert steps.hard == pytest.approx(one.hard, rel=0.02) and steps.memo == pytest.approx(one.memo, rel=0.02)


def test_the_gated_hard_skill_waits_for_the_easy_one():
    gated = Skills(replace(DIGITS, hard_after_easy=True), 8, 0)
    plain = Skills(DIGITS, 8, 0)
    cfg = {"lr": 0.03, "momentum": 0.9}
    early_g, early_p = gated.advance(SkillsState(), cfg, 50), plain.advance(SkillsState(), cfg, 50)
    late_g, late_p = gated.advance(SkillsState(), cfg, 2000), plain.advance(SkillsState(), cfg, 2000)
    assert early_g.hard < 0.5 * early_p.hard  # little easy skill yet: little hard skill
    assert late_g.hard / late_p.hard > 0.8  # once the easy skill is learned it grows at the plain rate
    wild = Skills(replace(DIGITS, diverge_eta=1.0, hard_after_easy=gated), 8, 0)
    st = wild.advance(SkillsState(), {"lr": 0.2, "momentum": 0.9}, 10)
    st = wild.advance(st, {"lr": 0.001, "momentum": 0.9}, 500)
    assert st.diverged and wild.accuracy(st) == DIGITS.chance_accuracy


def test_the_deviation_is_copied_and_its_future_comes_from_the_receivers_stream():
    noisy = Skills(replace(DIGITS, ar_std=0.05, ar_corr_50=0.5), 8, 0)
    donor = noisy.advance(noisy.initial_state(np.random.default_rng(1)), {"lr": 0.03}, 50, np.random.default_rng(2))
    a = noisy.advance(donor, {"lr": 0.03}, 50, np.random.default_rng(3))
    b = noisy.advance(donor, {"lr": 0.03}, 50, np.random.default_rng(4))
    again = noisy.advance(donor, {"lr": 0.03}, 50, np.random.default_rng(3))
    assert a.dev != b.dev and a.dev == again.dev and a.easy == b.easy


def test_a_run_shares_its_reading_term_across_trials_and_seeds_differ():
    m = Skills(replace(DIGITS, shared_std=0.05), 8, 0)
    r1, r1b, r2 = m.for_run(1), m.for_run(1), m.for_run(2)
    assert r1.shared(100) == r1b.shared(100) != r2.shared(100)


def test_a_noisy_skills_run_is_the_same_twice_and_differs_by_seed():
    inputs = load_inputs(EXP, ['learning.kind="skills"', "learning.params.ar_std=0.03",
                               "learning.params.shared_std=0.02"])
    runs = [json.dumps(simulate(inputs, inputs.make_strategy("tune-default"), s).events) for s in (0, 0, 1)]
    assert runs[0] == runs[1] != runs[2]


def test_the_fit_recovers_a_curve_it_generated():
    truth = DIGITS
    curves = []
    for lr in (0.003, 0.01, 0.03):
        its = tuple(range(50, 1001, 50))
        c = Curve(f"lr{lr}", 0, ((lr, 0.9, 1000),), tuple((i, 0.0) for i in its), 8)
        y = expected(Skills(truth, 8, 0), c)
        curves.append(replace(c, readings=tuple(zip(its, (float(v) for v in y)))))
    r = fit(curves, settings=FitSettings(starts=4))
    assert r.rmse < 0.01
    assert r.params.shared_std < 0.01 and r.params.ar_std < 0.02


def _csv(tmp_path, rows: list[dict], name: str = "curves.csv"):
    import csv as _csv_mod
    path = tmp_path / name
    cols = list(rows[0])
    with path.open("w", newline="") as fh:
        w = _csv_mod.DictWriter(fh, cols)
        w.writeheader()
        w.writerows(rows)
    return path


def _design_rows(params: SkillsParams = DIGITS, scale: float = 1.0) -> list[dict]:
    rows = []
    for lr in (0.003, 0.01, 0.03):
        its = list(range(0, 401, 50))
        c = Curve("c", 0, ((lr, 0.9, 400),), tuple((i, 0.0) for i in its), 8)
        for seed in (0, 1):
            for i, a in zip(its, expected(Skills(params, 8, 0), c)):
                rows.append({"run_id": f"lr{lr}-s{seed}", "learning_rate": lr, "momentum": 0.9, "batch_size": 8,
                             "seed": seed, "epoch": i, "test_accuracy": a * scale + 0.01 * (seed - 0.5)})
    return rows


@pytest.mark.slow
def test_calibrate_curves_skills_writes_a_learning_file_that_simulations_draw_from(tmp_path, capsys):
    from hetune.cli import main

    out = tmp_path / "fit.toml"
    path = _csv(tmp_path, _design_rows())
    assert main(["calibrate", "curves", str(path), "--kind", "skills", "--out", str(out)]) == 0
    assert "skills fitted to 6 curves" in capsys.readouterr().out
    base = ["learning.path=" + str(out), 'learning.kind="skills"', "learning.params.ar_std=0.0"]
    inputs = load_inputs(EXP, base)
    assert inputs.experiment.learning.kind == "skills" and inputs.experiment.learning.uncertainty["names"]
    assert inputs.experiment.learning.params["ar_std"] == 0.0  # --set beats the file
    models = [inputs.make_learning_model().for_run(s).params for s in (3, 3, 4)]
    assert models[0] == models[1] != models[2]  # one draw per seed, the same for every strategy at it
    fixed = load_inputs(EXP, base + ["learning.draws=false"]).make_learning_model()
    assert fixed.for_run(3).params == fixed.for_run(4).params == fixed.params
    world = load_inputs(EXP, base + ["learning.draw=7"]).make_learning_model()
    assert world.for_run(3).params == world.for_run(4).params != fixed.params  # a sweep world's one draw


@pytest.mark.parametrize("edit, needle", [
    (lambda rows: [dict(r, test_accuracy=r["test_accuracy"] * 100) for r in rows], "not a fraction in [0, 1]"),
    (lambda rows: [dict(r, test_accuracy="nan") for r in rows], "must be a finite number"),
    (lambda rows: [{k: v for k, v in r.items() if k != "seed"} for r in rows], "missing column(s) seed"),
    (lambda rows: rows[:3] + [rows[4], rows[3]] + rows[5:], "epochs out of order"),
    (lambda rows: [r for r in rows if r["learning_rate"] == 0.01], "needs runs at 3 or more"),
])
def test_bad_curves_get_one_line_exit_2_and_nothing_written(tmp_path, capsys, edit, needle):
    from hetune.cli import main

    path = _csv(tmp_path, edit(_design_rows()))
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(path), "--kind", "skills", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and str(path) in err
    assert not out.exists()


@pytest.mark.slow
def test_a_stated_scale_maps_a_percent_metric(tmp_path):
    from hetune.cli import main

    path = _csv(tmp_path, _design_rows(scale=100.0))
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(path), "--kind", "skills", "--out", str(out),
                 "--accuracy-scale", "100"]) == 0


def test_the_cifar10_curves_read_with_their_schedules_and_divergence():
    """Five runs of the published CIFAR-10 curves (tests/data/cifar10_3c3d-excerpt.csv: rows copied unchanged
    from the benchmark's cifar10_3c3d.csv, whose README gives their source), two of them diverged."""
    from hetune.calibrate.curves_io import csv_curves, schedule_factor

    curves = {c.run: c for c in csv_curves(REPO / "tests/data/cifar10_3c3d-excerpt.csv")}
    assert len(curves) == 5
    assert [round(schedule_factor("trapez", k, 100), 4) for k in (0, 1, 9, 10, 90, 91, 99)] == \
        [1.0, 0.1, 0.9, 1.0, 1.0, 0.9091, 0.1818]
    assert schedule_factor("cosine", 50, 100) == pytest.approx(0.5)
    assert [len(curves[r].readings) for r in ("cosine-lr0.354-m0.0261-s42", "cosine-lr0.756-m0.212-s42")] == [12, 1]
    trapez = curves["trapez-lr0.0672-m0.154-s42"]
    assert [round(lr, 5) for lr, _, _ in trapez.segments[:3]] == [0.06721, 0.00672, 0.01344]  # full lr, then 0.1, 0.2
    assert len(curves["none-lr0.122-m0.00167-s42"].segments) == 1  # a constant lr is one segment


def _learning_file(tmp_path, uncertainty: dict | None = None):
    import tomli_w

    from hetune.calibrate.skills_fit import params_table

    table = {"kind": "skills", "params": params_table(DIGITS)}
    if uncertainty is not None:
        table["uncertainty"] = uncertainty
    path = tmp_path / "learning.toml"
    path.write_text(tomli_w.dumps({"learning": table}))
    return path


UNCERTAIN = {"names": ["floor_weight", "memo_rate"], "transforms": ["lin", "log"], "mean": [7.4, -4.9],
             "cov": [[1.0, 0.1], [0.1, 0.2]]}


def test_sweep_draws_reports_how_often_each_strategy_ranks_first(tmp_path, capsys):
    from hetune.cli import main

    lf = _learning_file(tmp_path, UNCERTAIN)
    out = tmp_path / "draws"
    assert main(["sweep", "--set", f"learning.path={lf}", "--set", 'learning.kind="skills"', "--strategies",
                 "tune-default,hrfs", "--seeds", "2", "--draws", "3", "--jobs", "1", "--quiet", "--out", str(out)]) == 0
    got = json.loads((out / "draws.json").read_text())
    assert got["draws"] == 3 and sum(got["share_best"].values()) == pytest.approx(1.0)
    assert [w["draw"] for w in got["worlds"]] == [0, 1, 2] and (out / "draw-2" / "sweep.csv").is_file()
    assert "share of 3 draws" in capsys.readouterr().out


@pytest.mark.parametrize("sets, needle", [
    ([], "--draws needs a learning model with a fit's uncertainty"),
    (["learning.draws=false"], "--draws needs a learning model with a fit's uncertainty"),
])
def test_draws_without_uncertainty_are_refused(tmp_path, capsys, sets, needle):
    from hetune.cli import main

    lf = _learning_file(tmp_path, UNCERTAIN if sets else None)
    args = ["sweep", "--set", f"learning.path={lf}", "--set", 'learning.kind="skills"', "--seeds", "1", "--draws",
            "2", "--quiet", "--out", str(tmp_path / "d")]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    assert needle in capsys.readouterr().err


def test_a_broken_uncertainty_table_is_named(tmp_path, capsys):
    from hetune.cli import main

    lf = _learning_file(tmp_path, dict(UNCERTAIN, cov=[[1.0]]))
    assert main(["simulate", "--set", f"learning.path={lf}", "--set", 'learning.kind="skills"',
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "learning.uncertainty" in err and "cov must be a 2 x 2 table" in err and str(lf) in err


def test_a_shorter_designs_repeated_runs_are_read_once():
    from hetune.calibrate.skills_curves import read_curves

    curves = read_curves([str(REPO / "results/digits/1000-drop700/runs.json"),
                          str(REPO / "results/digits/600-drop300/runs.json")])
    names = sorted(c.run for c in curves)
    assert len(curves) == 15  # 9 constants (the 600-iteration ones are their prefixes) and 2 x 3 drops
    assert sum(n.startswith("drop-lr0.03-at300") for n in names) == 3
    assert all(len(c.readings) == 20 for c in curves if c.run.startswith("const"))


def test_a_set_learning_kind_wins_over_the_experiments_learning_file():
    smoke = REPO / "configs/experiments/smoke-local.toml"  # names the digits fit, of kind skills
    fitted = load_inputs(smoke).experiment.learning
    assert fitted.kind == "skills" and fitted.uncertainty and fitted.params
    other = load_inputs(smoke, ['learning.kind="nqm"']).experiment.learning
    assert other.kind == "nqm" and not other.uncertainty
    same = load_inputs(smoke, ['learning.kind="skills"']).experiment.learning
    assert same.params == fitted.params
