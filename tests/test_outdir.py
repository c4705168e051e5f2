"""No result is overwritten by accident: --resume continues, --force replaces and keeps the old one."""

from __future__ import annotations

import pytest

from conftest import write_table
from hetune.cli import main


def _one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_simulate_refuses_an_existing_run_and_force_keeps_it_aside(default_experiment, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(default_experiment), "--seed", "1", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["simulate", str(default_experiment), "--seed", "2", "--out", str(out)]) == 2
    _one_line_error(capsys, "--out", "already holds a result", "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched
    assert main(["simulate", str(default_experiment), "--seed", "2", "--out", str(out), "--force"]) == 0
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.replaced-")]
    assert len(aside) == 1
    assert {p.name: p.read_bytes() for p in aside[0].iterdir()} == before
    assert (out / "summary.json").read_bytes() != before["summary.json"]  # seed 2's run


def test_sweep_refuses_continues_with_resume_and_replaces_with_force(default_experiment, tmp_path, capsys):
    out = tmp_path / "sw"
    args = ["sweep", str(default_experiment), "--seeds", "1", "--strategies", "hrfs", "--quiet", "--out", str(out)]
    assert main(args) == 0
    csv = (out / "sweep.csv").read_bytes()
    assert main(args) == 2
    _one_line_error(capsys, "already holds a result (", "--resume", "--force")
    assert (out / "sweep.csv").read_bytes() == csv
    assert main(args + ["--resume"]) == 0 and (out / "sweep.csv").read_bytes() == csv
    assert main(args + ["--resume", "--force"]) == 2
    _one_line_error(capsys, "--force", "cannot be combined with --resume")
    assert main(args + ["--force"]) == 0
    assert [p.name.startswith("sw.replaced-") for p in tmp_path.iterdir()].count(True) == 1


def test_out_that_is_a_file_is_refused(default_experiment, tmp_path, capsys):
    f = tmp_path / "some_file"
    f.write_text("mine")
    assert main(["simulate", str(default_experiment), "--out", str(f)]) == 2
    _one_line_error(capsys, "is a file, not a folder")
    assert main(["sweep", str(default_experiment), "--seeds", "1", "--quiet", "--out", str(f)]) == 2
    _one_line_error(capsys, "is a file, not a folder")
    assert f.read_text() == "mine"


def test_a_folder_without_results_is_used(default_experiment, tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "README.txt").write_text("mine")
    assert main(["simulate", str(default_experiment), "--out", str(out)]) == 0
    assert (out / "README.txt").read_text() == "mine" and (out / "summary.json").is_file()


@pytest.mark.parametrize("argv", [
    ["calibrate", "--devices", "cpu-fast", "--out", "{f}"],
    ["adapt", "clock", "configs/adapt/adapt-convnet-early.toml", "--out", "{f}"],
])
def test_one_file_results_are_refused_before_any_work(tmp_path, capsys, argv):
    f = tmp_path / "existing"
    f.write_text("measured for hours")
    assert main([a.format(f=f) for a in argv]) == 2
    _one_line_error(capsys, "already exists", "--force")
    assert f.read_text() == "measured for hours" and sorted(tmp_path.iterdir()) == [f]


def test_a_policy_folder_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "policy"
    out.mkdir()
    (out / "policy.json").write_text("{}")
    table = write_table(tmp_path / "t.csv")
    assert main(["adapt", "learn", str(table), "--episodes", "320", "--out", str(out)]) == 2
    _one_line_error(capsys, "already holds a result (policy.json)")
    assert (out / "policy.json").read_text() == "{}" and sorted(p.name for p in out.iterdir()) == ["policy.json"]
