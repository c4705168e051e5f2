"""PBT parity (issue "The learning model fitted and checked", item 2a): Ray Tune's own
PopulationBasedTraining, driven by a stand-in for Tune's controller, against the simulator's PBT.

The benchmark (bench/bench_pbt_parity.py) runs 500 seeds of six settings; here a few dozen seeds of
small settings, enough to catch a gross divergence (the simulator once took 1,511 s where Ray took
234 s, with time_attr = time_total_s), in seconds.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from conftest import REPO
from hetune.real.pbt_parity import compare, sim_outcome, standin_outcome
from hetune.real.pbt_standin import run_standin
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.permutation import holm

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
BASE = ["cluster.path=" + str(REPO / "configs/clusters/v100x8.toml"), "experiment.budget_s=1000000000"]
BENCH = REPO / "bench/bench_pbt_parity.py"


def _inputs(*extra):
    return load_inputs(EXP, BASE + list(extra))


@pytest.mark.slow  # about 10 s each: 30 seeds of Ray's class under the stand-in and of the simulator
@pytest.mark.parametrize("extra", [
    ["experiment.population=4"],
    ["experiment.population=8", "pbt.synch=true"],
    ["experiment.population=8", 'pbt.time_attr="time_total_s"', "pbt.perturbation_interval=10"],
], ids=["pop4", "synch", "time-total-s"])
def test_the_simulator_runs_pbt_as_rays_own_class_does(extra):
    inputs = _inputs(*extra)
    ray = [standin_outcome(inputs, s) for s in range(30)]
    sim = [sim_outcome(inputs, s) for s in range(30)]
    rows = compare(ray, sim, permutations=400)
    # The makespan is judged by its size only: the simulator takes its PBT decisions after a chunk's
    # save where Ray takes them at the result (save_s later per synchronous round: +0.4%, but in every
    # seed), and at population 4 it finishes 4% sooner for a reason not yet found
    # (results/pbt-parity/README.md, "Open").
    pbt_rows = [r for r in rows if r.metric != "makespan_s"]
    rejected = [r for r, rej in zip(pbt_rows, holm([r.p_value for r in pbt_rows])) if rej]
    assert not rejected, rejected
    by = {(r.metric, r.test): r for r in rows}
    assert abs(by["makespan_s", "ks"].effect_pct) < 10, by["makespan_s", "ks"]
    # and the effects are small where a user looks: time to target within 25%, exploits within 0.5 per trial
    assert abs(by["time_s", "ks"].effect_pct) < 25, by["time_s", "ks"]
    assert abs(by["exploits", "ks"].effect) < 0.5, by["exploits", "ks"]


def test_the_stand_in_drives_rays_class_and_tunes_pending_rule():
    """Population 4 on 8 GPUs: no trial waits for a slot, yet Ray pauses trials at their perturbation
    points while an exploited trial's actor is starting (PENDING), and restages them one at a time."""
    run = run_standin(_inputs("experiment.population=4"), 0)
    assert run.exploits > 0 and run.pauses > 0
    assert sorted(run.final) == [0, 1, 2, 3] and all(0 < a <= 1 for a in run.final.values())
    assert [r[0] for r in run.readings] == sorted(r[0] for r in run.readings)  # clock order


def test_both_engines_start_from_one_population_so_their_first_readings_agree():
    """Same seed, same initial configurations and trial streams: before any exploit the two engines
    read the same accuracies (the events round them to 6 places); they differ only in how PBT runs."""
    inputs = _inputs("experiment.population=4")
    first_ray = sorted((tr, round(a, 6)) for _, tr, n, a in run_standin(inputs, 5).readings if n == 50)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 5).events
    first_sim = sorted((e["trial"], e["accuracy"]) for e in events if e["kind"] == "chunk" and e["iteration"] == 50)
    assert len(first_ray) == 4 and first_ray == first_sim


def test_the_simulator_pauses_a_trial_while_another_is_starting():
    """The same rule in the simulator: with fewer trials than GPUs, trials still pause (their worker
    restarts them) at perturbation points that fall while an exploited trial restarts."""
    inputs = _inputs("experiment.population=4")
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    exploited = {(e["trial"], e["t"]) for e in events if e["kind"] == "exploit"}
    resumes = [e for e in events if e["kind"] == "resume"]
    assert len(resumes) > len(exploited)  # more restarts than exploits: pauses without anyone waiting
    # a paused trial is restaged only when it is PBT's pick (the least progressed waiting trial): a
    # restart begins while another is starting only if it is less progressed than that one
    windows = [(e["t"] - e["duration_s"], e["t"] - e["load_s"] - e["copy_s"], (e["iteration"], e["trial"]))
               for e in resumes]
    overlaps = 0
    for begin, _, key in windows:
        for b2, up2, key2 in windows:
            if b2 < begin - 1e-9 < up2 - 2e-9:
                overlaps += 1
                assert key < key2, (key, key2)
    assert overlaps < len(windows) / 4


def test_time_total_s_perturbation_points_fall_between_evaluations():
    inputs = _inputs("experiment.population=8", 'pbt.time_attr="time_total_s"', "pbt.perturbation_interval=10")
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    at = [e["iteration"] for e in events if e["kind"] == "exploit"]
    assert at and any(i % inputs.experiment.experiment.checkpoint_interval for i in at)
    chunks = [e["iterations"] for e in events if e["kind"] == "chunk"]
    assert max(chunks) == inputs.experiment.experiment.checkpoint_interval  # no chunk of the 10 s "interval"


@pytest.mark.parametrize("args, key", [
    (["--set", "pbt.quantile_fraction=0.7"], "pbt.quantile_fraction"),
    (["--set", "pbt.perturbation_interval=-1"], "pbt.perturbation_interval"),
    (["--settings", "nope"], "--settings"),
])
def test_settings_outside_what_ray_accepts_get_one_line(tmp_path, args, key):
    out = tmp_path / "parity"
    r = subprocess.run([sys.executable, str(BENCH), "--seeds", "2", "--out", str(out), *args],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and key in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.slow
def test_the_benchmark_writes_its_table_and_the_inputs_it_ran(tmp_path):
    out = tmp_path / "parity"
    r = subprocess.run([sys.executable, str(BENCH), "--seeds", "6", "--permutations", "100", "--settings", "A-pop4",
                        "--jobs", "1", "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    table = (out / "table.md").read_text()
    assert "A-pop4" in table and "Holm" in table
    assert {p.name for p in (out / "inputs").iterdir()} == {"pbt-resnet18-cifar10.toml", "v100x8.toml",
                                                            "reference.toml"}
    first = json.loads((out / "table.json").read_text())
    assert not math.isnan(float(first["rows"][0]["p_value"]))
    # the tests again from the recorded outcomes, nothing run: the same table
    again = tmp_path / "again"
    r = subprocess.run([sys.executable, str(BENCH), "--from-outcomes", str(out / "outcomes.json"), "--permutations",
                        "100", "--out", str(again)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert json.loads((again / "table.json").read_text())["rows"] == first["rows"]
    assert (again / "inputs" / "v100x8.toml").is_file()
