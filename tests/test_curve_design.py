"""``hetune calibrate curves --design``: the plan, its price, bad input, and a real run through Ray that
resumes (calibrate/curve_design.py, real/design_runs.py, hetune/commands_design.py)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from hetune.calibrate.curve_design import plan
from hetune.cli import main
from hetune.sim.loader import load_inputs

DIGITS = str(REPO / "configs/experiments/digits-resnet18.toml")
SMOKE = str(REPO / "configs/experiments/smoke-local.toml")


def test_the_plan_spans_the_search_space_with_two_drops_and_a_raise_at_every_seed():
    d = plan(DIGITS, load_inputs(DIGITS), 3)
    assert len(d.runs) == 18 and {r.seed for r in d.runs} == {0, 1, 2}
    s0 = {r.name.rsplit("-s", 1)[0]: r.segments for r in d.runs if r.seed == 0}
    lrs = sorted(segs[0][0] for name, segs in s0.items() if name.startswith("const"))
    assert lrs == pytest.approx([0.001, 0.01, 0.1])
    drops = sorted(segs[0][2] for name, segs in s0.items() if name.startswith("drop"))
    assert drops == [200, 400]  # 1/3 and 2/3 of 600
    assert all(segs[1][0] == pytest.approx(0.01) for name, segs in s0.items() if name.startswith("drop"))
    (raise_,) = [segs for name, segs in s0.items() if name.startswith("raise")]
    assert raise_[0][0] == pytest.approx(0.001) and raise_[1][0] == pytest.approx(0.1) and raise_[-1][2] == 600


def test_plan_only_prices_the_design_against_the_pbt_run_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "design"
    assert main(["calibrate", "curves", "--design", DIGITS, "--out", str(out), "--plan-only"]) == 0
    text = capsys.readouterr().out
    assert "18 runs x 600 iterations = 10,800 trial-iterations" in text and "(4.5x as many)" in text
    assert "device-hours on cpu-fast" in text
    assert not out.exists()


@pytest.mark.parametrize("sets, needle", [
    (["pbt.mutations.lr.kind=\"choice\"", "pbt.mutations.lr.values=[0.01, 0.1]"], "2 learning rate(s)"),
    (["experiment.stop_iterations=4"], "at least 6 iterations"),
])
def test_a_design_that_cannot_identify_the_model_is_refused(tmp_path, capsys, sets, needle):
    argv = ["calibrate", "curves", "--design", DIGITS, "--out", str(tmp_path / "d")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert not (tmp_path / "d").exists()


def test_a_folder_of_another_design_is_refused(tmp_path, capsys):
    from hetune.calibrate.curve_design import open_design

    out = tmp_path / "d"
    open_design(out, plan(DIGITS, load_inputs(DIGITS), 2))
    assert main(["calibrate", "curves", "--design", DIGITS, "--out", str(out), "--seeds", "3"]) == 2
    assert "holds another design" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.torch
def test_a_small_design_trains_through_ray_fits_and_resumes_without_redoing_a_run(tmp_path, capsys):
    out = tmp_path / "d"
    argv = ["calibrate", "curves", "--design", SMOKE, "--out", str(out), "--seeds", "1", "--quiet",
            "--set", "experiment.stop_iterations=6", "--set", "experiment.checkpoint_interval=3",
            "--set", "pbt.perturbation_interval=3", "--set", "experiment.batch_size=2",
            "--set", "experiment.eval_samples=20"]  # a ResNet-18 step costs about a second here: kept tiny
    assert main(argv) == 0
    runs = sorted(p.name for p in (out / "runs").glob("*.json"))
    assert len(runs) == 6
    rec = json.loads((out / "runs" / runs[0]).read_text())
    assert [r[0] for r in rec["readings"]] == [3, 6] and all(0 <= r[1] <= 1 for r in rec["readings"])
    assert (out / "learning.toml").is_file()
    capsys.readouterr()
    # an interrupted design: one run lost; the rerun trains that one only
    lost = out / "runs" / runs[-1]
    lost.unlink()
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    assert main(argv) == 0
    assert "5 of 6 runs already" in capsys.readouterr().out
    assert lost.is_file()
    assert all((out / "runs" / n).stat().st_mtime_ns == t for n, t in kept.items())


@pytest.mark.slow
@pytest.mark.ray
def test_a_gpu_design_on_a_ray_without_gpus_is_refused_not_left_waiting(tmp_path, capsys):
    from hetune.real.cifar import write_synthetic

    write_synthetic(tmp_path / "cifar", "cifar10", train=20, test=20)
    exp = str(REPO / "configs/experiments/pbt-resnet18-cifar10.toml")  # a GPU cluster
    assert main(["calibrate", "curves", "--design", exp, "--out", str(tmp_path / "d"), "--seeds", "1",
                 "--data-dir", str(tmp_path / "cifar"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has GPU nodes but this Ray has no GPU" in err[0]
    assert not list((tmp_path / "d" / "runs").glob("*.json"))
