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


def test_chunks_compose_and_divergence_is_for_good():
    model = Skills(DIGITS, 8, 0)
    cfg = {"lr": 0.02, "momentum": 0.9}
    one = model.advance(SkillsState(), cfg, 300)
    two = model.advance(model.advance(SkillsState(), cfg, 120), cfg, 180)
    assert one.easy == pytest.approx(two.easy) and one.memo == pytest.approx(two.memo)
    wild = Skills(replace(DIGITS, diverge_eta=1.0), 8, 0)
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
