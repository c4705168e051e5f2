"""A sweep killed with SIGKILL at a random point and rerun with --resume ends with the same sweep.csv,
byte for byte, as an uninterrupted sweep (issue "Reliability", item 4)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
ARGS = [sys.executable, "-m", "hetune.cli", "sweep", str(EXP), "--strategies", "tune-default,hrfs,random-search",
        "--seeds", "4", "--jobs", "1", "--quiet"]


@pytest.mark.slow
def test_sweep_killed_at_random_points_resumes_to_the_same_csv(tmp_path):
    t0 = time.perf_counter()
    subprocess.run(ARGS + ["--out", str(tmp_path / "ref")], check=True, cwd=tmp_path, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    reference = (tmp_path / "ref" / "sweep.csv").read_bytes()
    rng = np.random.default_rng(0)
    for k in range(5):
        out = tmp_path / f"killed-{k}"
        proc = subprocess.Popen(ARGS + ["--out", str(out)], cwd=tmp_path, stdout=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(0.1, 0.9)) * wall)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        subprocess.run(ARGS + ["--out", str(out), "--resume"], check=True, cwd=tmp_path, stdout=subprocess.DEVNULL)
        assert (out / "sweep.csv").read_bytes() == reference, f"kill {k}"
