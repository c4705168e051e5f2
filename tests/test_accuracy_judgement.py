"""How a simulated distribution of best accuracy holds real runs (bench/accuracy_judgement.py)."""

from itertools import product

import numpy as np
import pytest

from conftest import REPO, bench_module


@pytest.fixture
def aj():
    return bench_module("accuracy_judgement")


def test_crps_matches_its_definition_and_rewards_a_sharp_right_forecast(aj):
    rng = np.random.default_rng(0)
    values = list(rng.normal(0.7, 0.05, 40))
    brute = np.mean([abs(v - 0.66) for v in values]) - 0.5 * np.mean([abs(a - b) for a, b in product(values, values)])
    assert aj.crps(0.66, values) == pytest.approx(brute, abs=1e-12)
    assert aj.crps(0.7, [0.7] * 10) == pytest.approx(0.0)
    wide = list(rng.normal(0.7, 0.2, 400))
    assert aj.crps(0.7, values) < aj.crps(0.7, wide)  # same centre: the sharper forecast scores better
    assert aj.crps(0.9, values) > aj.crps(0.7, values)


def _rec(real, values):
    return {"real": real, "values": values}


def test_the_paired_gap_is_judged_only_where_the_real_gap_is_resolved(aj):
    sim_a, sim_b = [0.8] * 50, [0.7] * 50
    a = {s: _rec(0.80 + 0.01 * s, sim_a) for s in range(5)}
    b = {s: _rec(0.70 + 0.012 * s, sim_b) for s in range(5)}
    g = aj.paired_gap(a, b)
    assert g["resolved"] and g["real_mean"] == pytest.approx(0.096) and g["sim_mean"] == pytest.approx(0.1)
    assert aj.gap_verdict(g) == "met"
    g_small = aj.paired_gap(a, {s: _rec(v["real"] - 0.1, [0.79] * 50) for s, v in b.items()})
    assert aj.gap_verdict(g_small) == "missed"  # simulated +0.01 against a real gap of about +0.2
    noisy = aj.paired_gap({0: _rec(0.8, sim_a), 1: _rec(0.6, sim_a)}, {0: _rec(0.6, sim_b), 1: _rec(0.7, sim_b)})
    assert not noisy["resolved"] and aj.gap_verdict(noisy).startswith("not judged")


@pytest.fixture
def pad():
    return bench_module("pbt_accuracy_design")


def _run_folder(path, params, **exp):
    import tomli_w

    path.mkdir(parents=True)
    fields = {"population": 6, "stop_iterations": 600, "batch_size": 8, "eval_samples": 500,
              "checkpoint_interval": 50, "model": "resnet18", "dataset": "digits", "target_accuracy": 0.5}
    (path / "config.toml").write_text(tomli_w.dumps({"experiment": {**fields, **exp},
                                                     "learning": {"kind": "skills", "params": params}}))
    return path


def test_the_table_refuses_a_run_judged_with_other_inputs_or_a_fit_from_a_judged_run(pad, tmp_path):
    import tomllib

    fit = tomllib.loads((REPO / pad.FIT).read_text())["learning"]["params"]
    design = {"learning_file": pad.FIT, "learning_fitted_from": ["results/digits/1000-drop700/runs.json"],
              "target_accuracy": 0.5, "experiment_fields": {"population": 6, "stop_iterations": 600}}
    good = _run_folder(tmp_path / "random-search-s0", fit)
    pad.check_runs(design, [good])  # same inputs: accepted
    other = _run_folder(tmp_path / "random-search-s1", {**fit, "floor_weight": 9.0}, stop_iterations=300)
    with pytest.raises(SystemExit) as e:
        pad.check_runs(design, [good, other])
    assert "random-search-s1" in str(e.value) and "stop_iterations, learning" in str(e.value)
    with pytest.raises(SystemExit) as e:
        judged = "results/pbt-accuracy/judged/runs/random-search-s0"
        pad.check_runs({**design, "learning_fitted_from": [judged]}, [good])
    assert "fitted from a judged run" in str(e.value)


def test_a_run_without_a_budget_is_judged_on_its_whole_run(aj):
    # the judged design has no budget (every trial trains to 600 iterations): compare's spread names best_accuracy
    spread = {"key": "best_accuracy", "median": 0.67, "lo": 0.58, "hi": 0.77, "values": [0.58, 0.67, 0.77]}
    f = {"best_accuracy": {"real": 0.666, "sim": 0.70}, "best_accuracy_at_budget": {"real": None, "sim": None},
         "sim_spread": {"best_accuracy": spread}}
    r = aj.record(f)
    assert r["real"] == 0.666 and r["inside"] and 0 < r["percentile"] < 1
