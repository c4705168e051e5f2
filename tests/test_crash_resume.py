"""A sweep killed with SIGKILL at a random point and rerun with --resume ends with the same sweep.csv,
byte for byte, as an uninterrupted sweep (issue "Reliability", item 4)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO, kill_session

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


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.torch
def test_calibration_killed_midway_resumes_measuring_only_what_is_missing(tmp_path, ray_address_file):
    """SIGKILL after some cells were written: the file holds them, and --resume keeps their numbers
    (not re-measured) and adds the rest."""
    import os
    import tomllib

    out = tmp_path / "cal.toml"
    args = [sys.executable, "-m", "hetune.cli", "calibrate", "--models", "resnet18", "--batch-sizes", "4,8,12",
            "--steps", "2", "--warmup", "1", "--skip-overheads", "--quiet", "--out", str(out)]

    def measured() -> dict[tuple[str, int], float]:
        try:
            doc = tomllib.loads(out.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            return {}
        return {(s["device"], s["batch"]): s["step_time_s"] for s in doc.get("samples", []) if s.get("ok", True)}

    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and len(measured()) < 2:
        time.sleep(0.2)
    assert proc.poll() is None, "the calibration ended before the kill point"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_session(proc.pid)  # the Ray processes the killed driver started, by id
    before = measured()
    assert 2 <= len(before) < 6  # 2 device types x 3 batch sizes
    subprocess.run(args + ["--resume"], check=True, cwd=tmp_path, stdout=subprocess.DEVNULL)
    after = measured()
    assert set(after) == {(d, b) for d in ("cpu-fast", "cpu-slow") for b in (4, 8, 12)}
    assert all(after[k] == v for k, v in before.items())  # kept as measured, not measured again
