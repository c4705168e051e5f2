"""Two-sample tests that stay valid on discrete, tied data, and Holm's correction across many tests.

PBT outcomes are discrete: iterations to a target come in multiples of the evaluation interval,
exploit counts are small integers and "never reached" is a category. Asymptotic tests (a
Kolmogorov-Smirnov p-value, a chi-square table) assume continuous data or large cells; a permutation
test makes no such assumption: it compares the observed statistic with the statistic over random
relabellings of the pooled sample, which under the null hypothesis (both engines draw from one
distribution) are all equally likely. Its p-value is ``(1 + #{permuted >= observed}) / (1 + B)``,
never below ``1 / (1 + B)``, so B must exceed the number of tests over the family-wise level for a
correction to be able to reject at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["TestResult", "ks_test", "chi_square_test", "mean_test", "holm"]


@dataclass(frozen=True)
class TestResult:
    """One permutation test.

    Args:
        statistic: the observed statistic (KS distance, chi-square, or |difference of means|).
        p_value: permutation p-value, in (0, 1].
        permutations: relabellings drawn.
    """

    statistic: float
    p_value: float
    permutations: int


def _labels(n1: int, n2: int, permutations: int, rng: np.random.Generator) -> np.ndarray:
    """``permutations`` random relabellings of n1 ones and n2 zeros (one per row, the observed one first)."""
    base = np.r_[np.ones(n1, dtype=np.int8), np.zeros(n2, dtype=np.int8)]
    rows = np.broadcast_to(base, (permutations + 1, base.size)).copy()
    rows[1:] = rng.permuted(rows[1:], axis=1)
    return rows


def _p_value(stats: np.ndarray) -> float:
    # the observed statistic counts as one of the relabellings (it is one): p is never 0
    return float(np.count_nonzero(stats >= stats[0] - 1e-12)) / stats.size


def _permutation(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, permutations: int, seed: int,
                 statistic: Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]) -> TestResult:
    x = np.r_[np.asarray(a, dtype=float), np.asarray(b, dtype=float)]
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples must hold at least one value")
    labels = _labels(n1, n2, permutations, np.random.default_rng(seed))
    stats = statistic(x, labels, n1, n2)
    return TestResult(float(stats[0]), _p_value(stats), permutations)


def _ks(x: np.ndarray, labels: np.ndarray, n1: int, n2: int) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    xs = x[order]
    ends = np.r_[xs[1:] != xs[:-1], True]  # last index of each run of tied values
    ones = np.cumsum(labels[:, order], axis=1)[:, ends]
    seen = np.cumsum(np.ones_like(xs))[ends]
    return np.max(np.abs(ones / n1 - (seen - ones) / n2), axis=1)


def ks_test(a: Sequence[float], b: Sequence[float], permutations: int = 2000, seed: int = 0) -> TestResult:
    """Whether two samples share one distribution: the Kolmogorov-Smirnov distance (the largest gap
    between the two empirical CDFs, evaluated at the end of each run of ties) with a permutation
    p-value. ``inf`` is a valid value (e.g. "never reached", above every finite one)."""
    return _permutation(a, b, permutations, seed, _ks)


def _mean(x: np.ndarray, labels: np.ndarray, n1: int, n2: int) -> np.ndarray:
    s1 = labels @ x
    return np.abs(s1 / n1 - (x.sum() - s1) / n2)


def mean_test(a: Sequence[float], b: Sequence[float], permutations: int = 2000, seed: int = 0) -> TestResult:
    """Whether two samples share one mean: |difference of means|, permutation p-value (two-sided)."""
    return _permutation(a, b, permutations, seed, _mean)


def chi_square_test(a: Sequence[object], b: Sequence[object], permutations: int = 2000, seed: int = 0) -> TestResult:
    """Whether two samples of categories share one distribution: Pearson's chi-square of the 2 x K
    table, with a permutation p-value (valid with sparse cells, where the chi-square law is not)."""
    cats = {c: i for i, c in enumerate(sorted(set(a) | set(b), key=repr))}
    codes = np.array([cats[c] for c in list(a) + list(b)], dtype=np.int64)
    k = len(cats)

    def stat(_: np.ndarray, labels: np.ndarray, n1: int, n2: int) -> np.ndarray:
        rows = labels.shape[0]
        flat = (np.arange(rows)[:, None] * 2 * k + labels.astype(np.int64) * k + codes[None, :]).ravel()
        table = np.bincount(flat, minlength=rows * 2 * k).reshape(rows, 2, k).astype(float)
        expected = table.sum(axis=1, keepdims=True) * np.array([n2, n1])[None, :, None] / (n1 + n2)
        with np.errstate(divide="ignore", invalid="ignore"):
            cells = np.where(expected > 0, (table - expected) ** 2 / expected, 0.0)
        return cells.sum(axis=(1, 2))

    return _permutation(codes.astype(float)[: len(a)], codes.astype(float)[len(a):], permutations, seed, stat)


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down correction: which hypotheses are rejected at family-wise error ``alpha``."""
    order = np.argsort(p_values, kind="stable")
    m = len(p_values)
    rejected = [False] * m
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected
