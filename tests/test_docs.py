"""Docs generated from the code stay current."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_the_module_map_is_current():
    r = subprocess.run([sys.executable, str(REPO / "docs/generate.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_progress_bars_draw_only_on_a_terminal(tmp_path):
    """A sweep whose stderr is a file (a CI log) gets no bar frames."""
    r = subprocess.run([sys.executable, "-m", "hetune.cli", "sweep", "--seeds", "1", "--strategies", "hrfs",
                        "--out", str(tmp_path / "s")], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "run/s" not in r.stderr and "it/s" not in r.stderr
