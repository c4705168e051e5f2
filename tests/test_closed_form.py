"""Closed-form timings: the engine charges exactly the documented costs."""

from __future__ import annotations

import pytest

from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.results import run_summary

S, V, L, E = 8.0, 1.0, 4.0, 2.0  # start overhead, save, load, eval (seconds), see conftest.FAST


def makespan(exp, strategy="tune-default", seed=0, overrides=()):
    inputs = load_inputs(exp, list(overrides))
    res = simulate(inputs, inputs.make_strategy(strategy), seed)
    return run_summary(inputs, res.events, strategy, seed), res


def test_one_trial_one_device(setup):
    exp = setup(population=1, stop=100, nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8}])
    summary, _ = makespan(exp)
    chunk = 50 * 0.5 + E
    # start, two chunks, one save between them (the last chunk stops the trial: no save)
    assert summary["makespan_s"] == pytest.approx(S + chunk + V + chunk)
    assert summary["time_to_target_s"] is None


def test_n_identical_trials_on_k_identical_workers(setup):
    # 4 trials, 2 workers; perturbation interval = stop, so PBT never exploits.
    exp = setup(population=4, stop=100, interval=100, ckpt=50)
    summary, res = makespan(exp)
    chunk = 50 * 0.5 + E
    # Ray Tune pauses only at perturbation points: each worker runs two trials back to back.
    assert summary["makespan_s"] == pytest.approx(2 * (S + chunk + V + chunk))
    assert sum(1 for e in res.events if e["kind"] == "pause") == 0


def test_tune_default_time_multiplexes_at_perturbation_points(setup):
    exp = setup(population=4, stop=100, interval=50, ckpt=50)
    _, res = makespan(exp)
    pauses = [e for e in res.events if e["kind"] == "pause"]
    assert pauses and all(e["iteration"] % 50 == 0 for e in pauses)
    # FIFO: trials 0 and 1 start first, 2 and 3 only after the first perturbation point
    starts = [e["trial"] for e in res.events if e["kind"] == "trial_start"]
    assert starts == [0, 1, 2, 3]


def test_two_device_speeds(setup):
    exp = setup(population=2, stop=100, interval=100,
                nodes=[{"name": "a", "device": "fast", "gpus": 1, "cpus": 4},
                       {"name": "b", "device": "slow", "gpus": 1, "cpus": 4}])
    summary, res = makespan(exp)
    slow_chunk = 50 * 2.0 + E
    assert summary["makespan_s"] == pytest.approx(S + slow_chunk + V + slow_chunk)
    # device-hours: each worker exists for the whole run
    assert summary["device_hours_fast"] == pytest.approx(summary["makespan_s"] / 3600, abs=1e-6)
    assert summary["cost"] == pytest.approx(summary["makespan_s"] / 3600 * 3.0, abs=1e-5)


def test_checkpoint_copy_between_nodes_is_charged(setup):
    # 3 trials on one worker per node, paused at every perturbation point: trials change nodes
    exp = setup(population=3, stop=150, interval=50,
                nodes=[{"name": "a", "device": "fast", "gpus": 1, "cpus": 4},
                       {"name": "b", "device": "fast", "gpus": 1, "cpus": 4}])
    _, res = makespan(exp)
    copy = 125.0 / (8.0 * 1000 / 8)  # MB / (MB/s)
    resumes = [e for e in res.events if e["kind"] == "resume"]
    assert resumes
    assert any(e["copy_s"] > 0 for e in resumes)
    for e in resumes:
        moved = e["copy_s"] > 0
        assert e["copy_s"] == pytest.approx(copy if moved else 0.0)
        assert e["duration_s"] == pytest.approx(S + L + (copy if moved else 0.0))
