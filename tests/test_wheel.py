"""A built wheel, installed into a fresh venv, runs the default sweep from an empty folder."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

SOURCES = ["pyproject.toml", "README.md", "hetune", "sim", "real", "calibrate", "adapt", "plots", "configs"]


@pytest.mark.slow
def test_wheel_installs_and_sweeps_outside_a_checkout(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:  # a copy, so that building leaves no build/ or egg-info in the checkout
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__", "figures")}
                                         if (REPO / name).is_dir() else {}))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
                   check=True, capture_output=True)
    wheel = next(dist.glob("hetune-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"hetune/sim/engine.py", "hetune/sim/strategies/hrfs.py", "hetune/adapt/policy.py",
            "hetune/configs/experiments/pbt-resnet18-cifar10.toml", "hetune/configs/clusters/gavel-12.toml",
            "hetune/configs/calibration/reference.toml", "hetune/configs/learning/digits-skills.toml"} <= names
    assert not {n for n in names if n.split("/")[0] in {"sim", "real", "calibrate", "plots", "adapt", "configs"}}
    torch_reqs = [line for line in meta.splitlines() if line.startswith("Requires-Dist: torch")]
    assert torch_reqs and all('extra == "real"' in line for line in torch_reqs)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # The dependencies come from this environment (no network in the test); hetune itself only from the wheel.
    fresh_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     check=True, capture_output=True, text=True).stdout.strip())
    (fresh_site / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    where = subprocess.run([str(py), "-c", "import hetune.sim; print(hetune.sim.__file__)"], cwd=empty,
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(fresh_site))
    for argv in (["sweep"], ["sweep", "configs/experiments/pbt-resnet18-cifar10.toml", "--out", "r2"]):
        proc = subprocess.run([str(venv / "bin" / "hetune"), *argv, "--seeds", "2", "--quiet"], cwd=empty,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "best strategy:" in proc.stdout
    assert (empty / "results" / "sweep-pbt-resnet18-cifar10" / "sweep.csv").is_file()
    # a shipped digits experiment names its learning fit beside it: shipped too
    proc = subprocess.run([str(venv / "bin" / "hetune"), "simulate", "configs/experiments/smoke-local.toml", "--out",
                           "r3"], cwd=empty, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "best accuracy" in proc.stdout, proc.stderr
    assert (empty / "r2" / "ranking.json").is_file()
