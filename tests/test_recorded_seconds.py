"""A recorded run's own seconds in a replay of it (sim/recorded_seconds.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import REPO
from hetune.real.divergence import run_divergence
from hetune.sim.events import make_event, read_events
from hetune.sim.recorded_seconds import RecordedSeconds
from hetune.sim.state import Trial
from hetune.sim.throughput import DeviceModel
from hetune.sim.timing_noise import TimingNoise

DM = DeviceModel(alpha_s=0.1, beta_s_per_sample=0.0, stem="cifar", save_s=0.5, load_s=0.25, start_overhead_s=3.0)


def trial(tid: int, iteration: int) -> Trial:
    t = Trial(tid, {}, np.random.default_rng(0))
    t.iteration = iteration
    return t


def seconds() -> RecordedSeconds:
    """Trial 0: placed at 1 s, up at 8 s; one chunk of 10 (12 s, 2 of them evaluation), saved 0.4 s
    later; placed again at 30 s and restored at 36.5 s (0.5 s copy, 1 s load); a chunk of 10 (6 s)."""
    ev = [make_event(1.0, "decision", trial=0, iteration=0, worker=0, action="run", iterations=10, restart=False),
          make_event(8.0, "trial_start", trial=0, iteration=1, worker=0, config={}, duration_s=0.01),
          make_event(20.0, "chunk", trial=0, iteration=10, worker=0, iterations=10, duration_s=12.0, eval_s=2.0),
          make_event(20.4, "checkpoint", trial=0, iteration=10, worker=0, duration_s=0.3),
          make_event(30.0, "decision", trial=0, iteration=10, worker=1, action="run", iterations=10, restart=False),
          make_event(36.5, "resume", trial=0, iteration=11, worker=1, duration_s=1.5, load_s=1.0, copy_s=0.5),
          make_event(42.5, "chunk", trial=0, iteration=20, worker=1, iterations=10, duration_s=6.0, eval_s=0.0)]
    return RecordedSeconds(ev).over(TimingNoise(np.random.SeedSequence(0), 8))


def test_starts_restores_and_saves_take_the_run_s_seconds_at_their_iteration():
    s = seconds()
    assert s.start_s(trial(0, 0), DM) == pytest.approx(7.0)  # placed at 1 s, up at 8 s
    assert s.save_s(trial(0, 10), DM, 9.0) == pytest.approx(0.4)  # the upload is in the recorded gap
    assert s.restore_s(trial(0, 10), DM, 7.0) == pytest.approx((5.0, 0.5, 1.0))  # 6.5 s: restart, copy, load
    assert s.used == {"recorded": 3, "calibrated": 0}
    # asked again, or at an iteration the run did not start or save at: the calibration's seconds
    assert s.restore_s(trial(0, 10), DM, 7.0) == pytest.approx((3.0, 7.0, 0.25))
    assert s.save_s(trial(0, 20), DM, 9.0) == pytest.approx(9.5)
    assert s.start_s(trial(1, 0), DM) == pytest.approx(3.0)
    assert s.used == {"recorded": 3, "calibrated": 3}
    # Tune's iteration on a start event may lag (0 or 1 for a first start): the record goes by what
    # the trial restores, its last checkpoint or its donor's
    lagging = [make_event(0.5, "decision", trial=0, iteration=0, worker=0, action="run", iterations=10, restart=False),
               make_event(9.5, "trial_start", trial=0, iteration=0, worker=0, config={}, duration_s=0.01),
               make_event(20.0, "exploit", trial=0, iteration=10, worker=0, donor=1, donor_iteration=30),
               make_event(21.0, "decision", trial=0, iteration=10, worker=0, action="run", iterations=10, restart=True),
               make_event(25.0, "resume", trial=0, iteration=10, worker=0, duration_s=1.0, load_s=1.0, copy_s=0.0)]
    s = RecordedSeconds(lagging).over(TimingNoise(np.random.SeedSequence(0), 8))
    assert s.start_s(trial(0, 0), DM) == pytest.approx(9.0)
    assert s.restore_s(trial(0, 30), DM, 0.0) == pytest.approx((3.0, 0.0, 1.0))


def test_chunks_take_the_run_s_seconds_per_iteration_however_the_replay_splits_them():
    s = seconds()
    t = trial(0, 0)
    assert s.chunk_s(t, "d", DM, 4, 99.0, 0.0) == pytest.approx((4.0, 0.0))  # 1 s per iteration, no evaluation
    assert s.chunk_s(t, "d", DM, 6, 99.0, 3.0) == pytest.approx((6.0, 2.0))  # ends where the run evaluated
    assert s.chunk_s(t, "d", DM, 5, 99.0, 0.0) == pytest.approx((3.0, 0.0))  # the second chunk: 0.6 s each
    # more iterations than the record still holds: the calibration's (no spread: the nominal seconds)
    assert s.chunk_s(t, "d", DM, 10, 1.0, 0.5) == pytest.approx((1.0, 0.5))
    assert s.used == {"recorded": 3, "calibrated": 1}


def test_a_replay_with_the_run_s_seconds_times_its_first_chunks_as_the_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REPO / "results/storage/runs/hrfs", run)
    got = run_divergence(run, tmp_path / "views.jsonl")
    assert got["seconds"] == "run" and got["placing"]["real"] == 25
    real = read_events(run / "events.jsonl")
    from hetune.real.divergence import replay_run
    from hetune.sim.snapshot import load_snapshot

    inputs, _ = load_snapshot(run, None)
    sim = replay_run(run, inputs, inputs.make_strategy(inputs.experiment.strategy.name), real)
    for tid in sorted({e["trial"] for e in real if e["kind"] == "chunk"}):
        first_real = next(e for e in real if e["kind"] == "chunk" and e["trial"] == tid)
        first_sim = next(e for e in sim if e["kind"] == "chunk" and e["trial"] == tid)
        assert first_sim["iterations"] == first_real["iterations"]
        assert first_sim["duration_s"] == pytest.approx(first_real["duration_s"], rel=1e-6)
        assert first_sim["eval_s"] == pytest.approx(first_real["eval_s"], rel=1e-6)
