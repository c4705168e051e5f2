"""Result folders and files are never overwritten by accident.

A folder that already holds a run or a sweep (or a result file that already exists) is refused
unless the user continues it (``--resume``) or replaces it (``--force``); ``--force`` moves the
old one aside under a timestamped name instead of deleting it, since a real run costs hours.
"""

from __future__ import annotations

import time
from pathlib import Path

from hetune.sim.errors import ConfigError

# Files whose presence means a folder holds a result (a run, a sweep, a real run or its journal).
RESULT_FILES = ("summary.json", "events.jsonl", "events.partial.jsonl", "sweep.csv", "ranking.json",
                "config.toml", "inputs.json", "repeats.json", "policy.json")


def _holds_result(folder: Path) -> str | None:
    """The first result file found in ``folder`` or one level below it, relative; None if there is none."""
    for sub in [folder] + sorted(p for p in folder.iterdir() if p.is_dir()):
        for name in RESULT_FILES:
            if (sub / name).is_file():
                return str((sub / name).relative_to(folder))
    return None


def set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.replaced-<YYYYmmdd-HHMMSS>[-N]`` beside it and return the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        dest = path.with_name(f"{path.name}.replaced-{stamp}" + (f"-{n}" if n > 1 else ""))
        if not dest.exists():
            path.rename(dest)
            return dest
    raise ConfigError(str(path), "", "too many replaced copies beside it; remove some")


def _check_flags(resume: bool, force: bool) -> None:
    if resume and force:
        raise ConfigError("--force", "", "cannot be combined with --resume (continue or replace, not both)")


def claim_folder(out: Path, *, resume: bool = False, force: bool = False, can_resume: bool = True) -> Path | None:
    """Make ``out`` safe to write a result into; return where an old result was moved, if it was.

    Args:
        out: the result folder (``--out``).
        resume: the user continues the result already there.
        force: the user replaces it; it is moved aside, not deleted.
        can_resume: whether the command offers ``--resume`` (named in the refusal only if so).
    """
    _check_flags(resume, force)
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", "", f"{out} is a file, not a folder")
    if not out.is_dir() or resume:
        return None
    found = _holds_result(out)
    if found is None:
        return None
    if not force:
        how = "continue it with --resume or replace it with --force" if can_resume else "replace it with --force"
        raise ConfigError("--out", "", f"{out} already holds a result ({found}); {how} "
                          "(--force keeps the old folder under a new name)")
    return set_aside(out)


def claim_file(out: Path, *, keep: bool = False, force: bool = False, keep_flags: str = "--resume") -> Path | None:
    """Like :func:`claim_folder` for a result that is one file (a calibration, a table, a clock).

    Args:
        out: the file (``--out``).
        keep: the user continues or merges into the existing file.
        force: the user replaces it; it is moved aside, not deleted.
        keep_flags: the flags that continue it, for the refusal ("" when the command has none).
    """
    _check_flags(keep, force)
    if out.is_dir():
        raise ConfigError("--out", "", f"{out} is a folder, not a file")
    if not out.exists() or keep:
        return None
    if not force:
        how = f"continue it with {keep_flags} or replace it with --force" if keep_flags else "replace it with --force"
        raise ConfigError("--out", "", f"{out} already exists; {how} (--force keeps the old file under a new name)")
    return set_aside(out)
