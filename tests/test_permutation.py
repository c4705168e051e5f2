"""Permutation tests for discrete, tied data and Holm's correction (sim/permutation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetune.sim.permutation import chi_square_test, holm, ks_test, mean_test


def _draw(rng, values, n):
    return rng.choice(values, size=n, p=[0.1, 0.3, 0.3, 0.2, 0.1])


def test_under_one_distribution_a_test_rejects_at_its_level():
    """Tied data with an "inf" category: 200 replicate pairs from one distribution; at 5% each test
    rejects about 5% of them (an asymptotic KS test on such ties is far from its level)."""
    rng = np.random.default_rng(0)
    values = [400, 450, 500, 550, math.inf]
    ks_rej = chi_rej = 0
    for i in range(200):
        a, b = _draw(rng, values, 60), _draw(rng, values, 60)
        ks_rej += ks_test(a, b, 199, seed=i).p_value <= 0.05
        chi_rej += chi_square_test([str(x) for x in a], [str(x) for x in b], 199, seed=i).p_value <= 0.05
    assert 2 <= ks_rej <= 20 and 2 <= chi_rej <= 20, (ks_rej, chi_rej)


def test_a_shift_of_one_step_is_rejected():
    rng = np.random.default_rng(1)
    a = _draw(rng, [400, 450, 500, 550, math.inf], 300)
    shifted = _draw(rng, [450, 500, 550, 600, math.inf], 300)
    assert ks_test(a, shifted, 1000).p_value < 0.01
    assert chi_square_test([str(x) for x in a], [str(x) for x in shifted], 1000).p_value < 0.01


def test_the_ks_distance_is_evaluated_at_the_end_of_each_run_of_ties():
    # every value tied: the empirical CDFs agree at the only value, whatever the labels
    assert ks_test([1, 1, 1], [1, 1], 200).statistic == 0.0
    assert ks_test([1, 1, 2], [1, 2, 2], 200).statistic == pytest.approx(1 / 3)


def test_a_p_value_is_never_zero_and_counts_the_observed_relabelling():
    r = mean_test([0.0] * 50, [1.0] * 50, permutations=99)
    assert r.p_value == pytest.approx(1 / 100)


def test_the_chi_square_statistic_matches_pearsons_formula():
    a, b = ["x"] * 30 + ["y"] * 10, ["x"] * 10 + ["y"] * 30
    # 2 x 2 table [[30, 10], [10, 30]], expected 20 everywhere: 4 * 100 / 20
    assert chi_square_test(a, b, 200).statistic == pytest.approx(20.0)


def test_holm_steps_down():
    # m = 4, sorted: 0.001 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2 stops (0.04 is kept too)
    assert holm([0.03, 0.001, 0.04, 0.01]) == [False, True, False, True]
    assert holm([0.5, 0.6]) == [False, False]


def test_empty_samples_are_refused():
    with pytest.raises(ValueError):
        ks_test([], [1.0])
