"""PBT maths against Ray Tune's rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetune.sim.config import Mutation, PBTConfig, quantile_count
from hetune.sim.pbt import explore, quantiles, sample_config
from hetune.sim.ranking import Ranking
from hetune.sim.surrogate import SurrogateParams, advance, expected_accuracy, quality

MUT = {"lr": Mutation("uniform", 1e-4, 1.0, clip=True), "momentum": Mutation("choice", values=(0.8, 0.9, 0.99))}


def pbt(**kw) -> PBTConfig:
    return PBTConfig(mutations=MUT, **kw)


@pytest.mark.parametrize("n,k", [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1), (5, 2), (8, 2), (20, 5), (21, 6)])
def test_quantile_count_matches_ray(n, k):
    assert quantile_count(n, 0.25) == k
    assert quantile_count(n, 0.5) == n // 2


def test_explore_perturbs_by_factor_or_shifts_neighbour():
    rng = np.random.default_rng(0)
    for _ in range(200):
        new, ops = explore({"lr": 0.1, "momentum": 0.9}, pbt(resample_probability=0.0), rng)
        assert new["lr"] in (pytest.approx(0.12), pytest.approx(0.08))
        assert new["momentum"] in (0.8, 0.99)
        assert ops["momentum"] in ("shift left", "shift right")


def test_explore_shift_clamps_at_list_ends():
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(100):
        new, ops = explore({"lr": 0.1, "momentum": 0.99}, pbt(resample_probability=0.0), rng)
        seen.add(new["momentum"])
        if ops["momentum"] == "shift right (noop)":
            assert new["momentum"] == 0.99
    assert seen == {0.9, 0.99}


def test_explore_resamples_inside_the_domain_and_clips():
    rng = np.random.default_rng(2)
    for _ in range(200):
        new, ops = explore({"lr": 0.95, "momentum": 0.8}, pbt(resample_probability=1.0), rng)
        assert ops == {"lr": "resample", "momentum": "resample"}
        assert 1e-4 <= new["lr"] <= 1.0
    new, _ = explore({"lr": 0.95, "momentum": 0.8}, pbt(resample_probability=0.0, perturbation_factors=(1.2,)), rng)
    assert new["lr"] == 1.0  # clipped to high, as HRFS does


def test_resample_probability_is_honoured():
    rng = np.random.default_rng(3)
    ops = [explore({"lr": 0.1, "momentum": 0.9}, pbt(resample_probability=0.25), rng)[1]["lr"] for _ in range(4000)]
    frac = sum(o == "resample" for o in ops) / len(ops)
    assert 0.22 < frac < 0.28


def test_sample_config_is_seeded():
    a = sample_config(MUT, np.random.default_rng(5))
    b = sample_config(MUT, np.random.default_rng(5))
    assert a == b and 1e-4 <= a["lr"] <= 1 and a["momentum"] in (0.8, 0.9, 0.99)


@settings(derandomize=True)
@given(st.dictionaries(st.integers(0, 50), st.floats(0, 1), max_size=40), st.sampled_from([0.1, 0.25, 0.5]))
def test_incremental_ranking_agrees_with_sorting(scores, fraction):
    r = Ranking("max")
    for t, s in scores.items():
        r.update(t, 0.5)  # updates replace the old score
        r.update(t, s)
    bottom, top = quantiles(scores, fraction)
    assert sorted(top) == sorted(r.top(fraction))
    assert sorted(t for t in scores if r.in_bottom(t, fraction)) == sorted(bottom)


def test_surrogate_bad_learning_rates_are_worse_and_progress_copies():
    p = SurrogateParams()
    good = {"lr": 0.1, "momentum": 0.9}
    high = {"lr": 0.9, "momentum": 0.99}
    low = {"lr": 0.0005, "momentum": 0.8}
    assert quality(p, good) == pytest.approx(1.0)
    assert quality(p, high) == 0.0  # lr_eff 90 > diverge_lr
    assert quality(p, low) < 0.05
    acc = {name: expected_accuracy(p, advance(p, 0.0, cfg, 1000)) for name, cfg in
           {"good": good, "high": high, "low": low}.items()}
    assert acc["good"] > 0.8 > acc["low"] and acc["high"] == pytest.approx(p.chance_accuracy)
