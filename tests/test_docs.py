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


def test_a_config_key_without_a_description_fails_the_docs():
    import dataclasses

    import pytest

    sys.path.insert(0, str(REPO / "docs"))
    from config_reference import Undocumented, rows

    @dataclasses.dataclass(frozen=True)
    class NewTable:
        """A table.

        Args:
            known: described.
        """

        known: int = 1
        added: float = 0.5

    with pytest.raises(Undocumented, match="added"):
        list(rows(NewTable))


def test_the_config_reference_names_types_defaults_and_ranges():
    text = (REPO / "docs/config.md").read_text()
    assert "| `pbt.quantile_fraction` | float | 0.25 | must be in (0, 0.5] |" in text
    assert "| `nodes[].gpus` | int | 0 | must be >= 0 |" in text


def _commands() -> set[tuple[str, ...]]:
    """Every ``hetune`` command and sub-command the parser knows, as word tuples."""
    import argparse

    from hetune.cli import build_parser

    def walk(p: argparse.ArgumentParser, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        out = {prefix}
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    out |= walk(sp, prefix + (name,))
        return out

    return walk(build_parser(), ())


def test_the_docs_name_only_commands_that_exist():
    import re

    known = _commands()
    # a mistyped command in the docs (it once said ``hetune clusters``) is caught here
    wrong = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in re.finditer(r"`hetune ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)", page.read_text()):
            words = (m.group(1),) + tuple(m.group(2).split())
            if words not in known and words[:1] not in known:
                wrong.add((page.name, " ".join(words)))
            elif len(words) == 2 and words not in known and any(k[:1] == words[:1] and len(k) == 2 for k in known):
                wrong.add((page.name, " ".join(words)))
    assert not wrong
