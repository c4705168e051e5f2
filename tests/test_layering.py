"""The package graph: imports run one way, and simulating needs neither torch nor ray."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

# hetune.<package> -> the hetune packages its modules may import (DESIGN: "Imports run one way").
ALLOWED = {
    "sim": {"sim"},
    "real": {"sim", "real"},
    "calibrate": {"sim", "real", "calibrate"},
    "adapt": {"sim", "real", "adapt"},
    "plots": {"sim", "plots"},
    "configs": set(),
}
FOLDER = {"sim": "sim", "real": "real", "calibrate": "calibrate", "adapt": "adapt", "plots": "plots",
          "configs": "configs"}


def _hetune_imports(path: Path) -> set[str]:
    """The hetune subpackages a module imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "hetune" else [f"hetune.{a.name}" for a in node.names]
        found |= {n.split(".")[1] if n.count(".") else "hetune" for n in names if n.split(".")[0] == "hetune"}
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_run_one_way(package):
    files = sorted((REPO / FOLDER[package]).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(REPO)): sorted(_hetune_imports(f) - ALLOWED[package]) for f in files}
    assert {f: v for f, v in bad.items() if v} == {}


def test_the_checker_sees_a_forbidden_import(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from hetune.real.models import build_model\n    import hetune.adapt.policy\n")
    assert _hetune_imports(mod) == {"real", "adapt"}


def test_no_top_level_names_besides_hetune():
    """Nothing of the project imports the old top-level names (sim, real, ...) any more."""
    old = {"sim", "real", "calibrate", "plots", "adapt"}
    offenders = []
    for f in sorted(REPO.glob("*/**/*.py")):
        if ".venv" in f.parts:
            continue
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            offenders += [f"{f.relative_to(REPO)}: {m}" for m in mods if m.split(".")[0] in old]
    assert offenders == []


def test_simulating_and_plotting_load_neither_torch_nor_ray():
    code = ("import pkgutil, importlib, sys\n"
            "import hetune.sim, hetune.plots, hetune.commands_sim\n"
            "for pkg in (hetune.sim, hetune.plots):\n"
            "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(m for m in ('torch', 'torchvision', 'ray') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


BLOCK_TORCH = "import sys; sys.modules['torch'] = None; sys.modules['torchvision'] = None\n"


def test_sweep_runs_without_torch(tmp_path):
    code = BLOCK_TORCH + ("from hetune.cli import main\n"
                          f"sys.exit(main(['sweep', '--seeds', '1', '--strategies', 'tune-default,hrfs', '--quiet', "
                          f"'--out', {str(tmp_path / 'sw')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "sw" / "sweep.csv").is_file()


@pytest.mark.parametrize("argv", [["validate", "experiments/smoke-local.toml", "--out", "r"],
                                  ["calibrate", "--out", "c.toml"],
                                  ["adapt", "learn", "t.csv", "--out", "p"]])
def test_commands_needing_torch_say_so_in_one_line(tmp_path, argv):
    code = BLOCK_TORCH + f"from hetune.cli import main\nsys.exit(main({argv!r}))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "hetune[real]" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []
