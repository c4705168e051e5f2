"""The digits fidelity table's learning side: where a real best accuracy falls in the simulated
distribution, and how many runs a one-point target would need (bench/fidelity_digits.py)."""

import json
import math

import pytest

from conftest import REPO, bench_module


@pytest.fixture
def fd():
    return bench_module("fidelity_digits")


def test_percentile_counts_ties_half_and_skips_missing(fd):
    assert fd.percentile(0.5, [0.1, 0.5, 0.9, None]) == pytest.approx(0.5)
    assert fd.percentile(1.0, [0.1, 0.2]) == 1.0 and fd.percentile(0.0, [0.1, 0.2]) == 0.0
    assert fd.percentile(None, [0.1]) is None and fd.percentile(0.3, [None]) is None


def test_resolution_pools_the_spread_of_each_configuration(fd, tmp_path):
    data = {"a": {"best_percentiles": [0.9, 0.7], "best_reals": [0.6, 0.7], "best_within": 2},
            "b": {"best_percentiles": [0.2, 0.8, 0.5], "best_reals": [0.5, 0.5, 0.8], "best_within": 3},
            "divergence": {}}
    text = fd.accuracy_resolution(data, tmp_path)  # no curve runs in tmp_path: no in-sample sentence
    sd = math.sqrt((0.005 + 2 * 0.03) / 3)  # pooled: variances 0.005 (1 dof) and 0.03 (2 dof)
    assert "inside the simulated 95% range 5/5" in text and "mean percentile in the simulated distribution 0.62" in text
    assert f"spread by {100 * sd:.1f} points" in text and "3 degrees of freedom" in text
    assert f"about {math.ceil((1.25 * sd / 0.005) ** 2)} runs per configuration" in text
    assert "curve runs" not in text
    assert fd.accuracy_resolution({"a": {"best_percentiles": [0.5], "best_reals": [0.6], "best_within": 1}},
                                  tmp_path) == ""  # one run per configuration: no spread to pool


def test_the_committed_digits_table_places_every_run_and_the_curve_runs(fd):
    out = REPO / "results/fidelity/digits"
    runs = sorted((out / "runs").glob("*-s[0-9]/fidelity.json"))
    text, data = fd.planner_section(out, ["hrfs", "random-search", "tune-default-plain"])
    fids = [json.loads(p.read_text()) for p in runs
            if p.parent.name.rsplit("-s", 1)[0] in ("hrfs", "random-search", "tune-default-plain")]
    inside = sum(f["real_within_sim_spread"]["best_accuracy"] for f in fids)
    assert f"inside the simulated 95% range {inside}/{len(fids)}" in text
    assert "The curve runs the model was fitted from" in text and text.count("percentiles") == 1
    for label in ("hrfs", "random-search"):
        assert all(0 <= p <= 1 for p in data[label]["best_percentiles"])
