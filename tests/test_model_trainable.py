"""The model trainable: Ray Tune PBT for real on the learning model's dynamics, without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.events import read_events
from hetune.sim.loader import load_inputs

SMOKE = REPO / "configs/experiments/smoke-local.toml"
MODEL = ["--set", 'real.trainable="model"', "--set", "real.model_sleep=0", "--set", 'learning.kind="nqm"',
         "--set", "experiment.target_accuracy=0.95"]


def test_the_model_trainable_imports_no_torch():
    code = ("import sys; import hetune.real.model_trainable; "
            "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"


def test_the_model_trainable_rebuilds_the_experiments_model():
    from hetune.real.model_trainable import build_model, device_seconds, learning_setup

    inputs = load_inputs(SMOKE, ['learning.kind="nqm"'])
    rebuilt, here = build_model(learning_setup(inputs)), inputs.make_learning_model()
    a = rebuilt.advance(rebuilt.initial_state(np.random.default_rng(0)), {"lr": 0.1, "momentum": 0.9}, 30)
    b = here.advance(here.initial_state(np.random.default_rng(0)), {"lr": 0.1, "momentum": 0.9}, 30)
    assert rebuilt.accuracy(a) == here.accuracy(b)
    # the sleep per step is the calibrated step time of each device type (the slow one is slower)
    secs = device_seconds(inputs, 1.0)
    assert 0 < secs["cpu-fast"]["step_s"] < secs["cpu-slow"]["step_s"]
    assert device_seconds(inputs, 0.0)["cpu-fast"]["step_s"] == 0


@pytest.mark.slow
@pytest.mark.ray
def test_rays_own_pbt_runs_on_the_learning_model(tmp_path, capsys):
    out = tmp_path / "model-run"
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--plain", "--out", str(out), "--quiet",
                 *MODEL]) == 0
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2, 3}
    exploits = [e for e in events if e["kind"] == "exploit"]
    assert exploits  # Ray's PBT exploited on the model's readings
    assert all(e.get("loss") is not None for e in events if e["kind"] == "chunk")  # for the learning-model fit
    readings = [e["accuracy"] for e in events if e["kind"] == "chunk" and e["accuracy"] is not None]
    assert readings and all(0.0 <= a <= 1.0 for a in readings) and max(readings) > 0.2
    cfg = json.loads((out / "inputs.json").read_text())
    assert cfg["frozen"] == "before the run started"
    assert main(["compare", str(out)]) == 0  # judged by the simulator on the same learning model
    assert "makespan: real" in capsys.readouterr().out
    # Ray Tune's own folder (results, pbt_global.txt) gives the fit the histories the recorder saw:
    # the same evaluations, and exploited trials' segments from the same donor checkpoints
    from hetune.calibrate.nqm_curves import read_histories

    tune_folder = next(p for p in (out / "tune").iterdir() if p.is_dir())
    ours, rays = read_histories([str(out)], "accuracy", "loss", None, None), read_histories(
        [str(tune_folder)], "accuracy", "loss", None, None)

    def shape(histories):
        trial_of = {h.key: sorted(h.segments[0].readings, key=lambda r: r.iteration)[0].lr for h in histories}
        return sorted((round(trial_of[h.key], 9), [(s.origin and round(trial_of[s.origin.donor], 9),
                                                    s.origin and s.origin.iteration,
                                                    [(r.iteration, round(r.accuracy, 4)) for r in s.readings
                                                     if r.accuracy is not None]) for s in h.segments])
                      for h in histories)

    # Ray 2.60 at times starts an exploited trial's result.json afresh at its restore, losing what the
    # trial reported before (seen once in about five runs here): such a trial is left out, and only it
    theirs = shape(rays)
    whole = [x for x in theirs if x[1][0][2] and x[1][0][2][0][0] == 10]  # the first evaluation, iteration 10
    lost = len(theirs) - len(whole)
    assert lost <= 1
    lrs = {x[0] for x in whole}
    assert whole == [x for x in shape(ours) if x[0] in lrs]
    if not lost:
        assert sum(len(h.segments) - 1 for h in rays) == len(exploits)
