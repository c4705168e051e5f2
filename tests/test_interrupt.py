"""Ctrl-C and sweep flags checked before anything is written (issue "No traceback, no hang, nothing lost",
items 1-2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from hetune.cli import main


@pytest.mark.slow
def test_ctrl_c_stops_a_two_job_sweep_at_once_keeps_its_rows_and_resume_finishes_it(tmp_path):
    out = tmp_path / "sweep"
    argv = [sys.executable, "-m", "hetune.cli", "sweep", "--seeds", "60", "--jobs", "2", "--out", str(out), "--quiet"]
    p = subprocess.Popen(argv, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not ((out / "sweep.csv").is_file() and
                                         len((out / "sweep.csv").read_text().splitlines()) > 10):
        time.sleep(0.1)
    t0 = time.time()
    os.killpg(p.pid, signal.SIGINT)  # as a terminal does: the whole process group, workers included
    _, err = p.communicate(timeout=30)
    assert time.time() - t0 < 2.0
    assert p.returncode == 130 and err.strip() == "hetune: interrupted; finished results were kept"
    kept = len((out / "sweep.csv").read_text().splitlines()) - 1
    assert 10 <= kept < 360
    done = subprocess.run(argv + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0
    assert len((out / "sweep.csv").read_text().splitlines()) - 1 == 360


@pytest.mark.parametrize("flags, needle", [
    (["--strategies", ""], "--strategies: names no strategy"),
    (["--strategies", " , "], "--strategies: names no strategy"),
    (["--strategies", "hrfs,tune-default,hrfs"], "--strategies: names hrfs more than once"),
    (["--seeds", "1000000000"], "= 6,000,000,000 simulations, more than a sweep holds"),
    (["--seeds", "2000", "--sensitivity", "200"], "x 200 worlds = 2,400,000 simulations"),
    (["--draws", "2", "--sensitivity", "2"], "--draws: cannot be combined with --sensitivity"),
])
def test_sweep_flags_are_checked_before_anything_is_written(tmp_path, capsys, flags, needle):
    out = tmp_path / "sweep"
    assert main(["sweep", "--out", str(out), "--quiet"] + flags) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not out.exists()
