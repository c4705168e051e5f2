"""Calibration speed and fidelity on this machine (not part of the test run).

    python bench/bench_calibrate.py

speed:    `hetune calibrate` of resnet18 at 3 batch sizes on one emulated device type, end to end
          with Ray start (issue 3 target: < 90 s).
fidelity: 3 repeats, fit on batch sizes 16, 32, 64, 128, predict held-out 48 and 96
          (target: within 10%), and the spread across repeats.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def hetune(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "hetune.cli", *args], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        hetune("calibrate", "--cluster", "configs/clusters/local.toml", "--devices", "cpu-fast", "--models", "resnet18",
               "--batch-sizes", "32,64,128", "--steps", "10", "--out", f"{d}/speed.toml", "--quiet")
        print(f"speed: resnet18 x 3 batch sizes x 1 emulated device type, 10 steps each: "
              f"{time.perf_counter() - t0:.1f} s end to end (target < 90 s)", flush=True)
        out = hetune("calibrate", "--cluster", "configs/clusters/local.toml", "--models", "resnet18",
                     "--batch-sizes", "16,32,64,128", "--holdout", "48,96", "--steps", "10", "--repeat", "3",
                     "--out", f"{d}/fidelity.toml", "--quiet")
        print(out)


if __name__ == "__main__":
    main()
