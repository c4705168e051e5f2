"""What every subcommand shares: shipped configs, the --set option, and the torch check."""

from __future__ import annotations

import argparse
import importlib.resources
import sys
import time
from pathlib import Path
from typing import Any

from hetune.sim.errors import ConfigError

DEFAULT_EXPERIMENT_NAME = "experiments/pbt-resnet18-cifar10.toml"


def progress_bar(quiet: bool, **kwargs: Any) -> Any:
    """A tqdm bar on stderr when it is a terminal; to a log file (not a terminal), a line at each tenth done or
    every 30 s at most (``ProgressLines``); nothing when ``quiet``."""
    from tqdm import tqdm

    if not quiet and not sys.stderr.isatty():
        return ProgressLines(kwargs.get("total") or 0, str(kwargs.get("desc", "progress")), str(kwargs.get("unit", "")))
    return tqdm(file=sys.stderr, disable=quiet, **kwargs)


class ProgressLines:
    """Progress for a log: ``<desc>: done/total <unit>s (pct)`` when a new tenth is done or 30 s have passed
    since the last line, and at the end (the tqdm attributes the commands set: ``n``, ``total``)."""

    def __init__(self, total: int, desc: str, unit: str) -> None:
        self.n, self.total, self.desc, self.unit = 0, total, desc, unit
        self._tenth, self._last = 0, time.monotonic()

    def refresh(self) -> None:
        tenth = int(10 * self.n / self.total) if self.total else 0
        if tenth > self._tenth or time.monotonic() - self._last >= 30:
            self._line()

    def close(self) -> None:
        if self.total and self.n and self._tenth < 10:
            self._line()

    def _line(self) -> None:
        self._tenth = int(10 * self.n / self.total) if self.total else 0
        self._last = time.monotonic()
        pct = f" ({self.n / self.total:.0%})" if self.total else ""
        print(f"{self.desc}: {self.n:,}/{self.total:,} {self.unit}s{pct}", file=sys.stderr, flush=True)


def shipped(relpath: str = "") -> Path:
    """A file or folder of the configs shipped with hetune (package data, found wherever it is installed).

    Args:
        relpath: path inside the configs folder, e.g. "clusters/gavel-12.toml".
    """
    return Path(str(importlib.resources.files("hetune.configs"))) / relpath


def default_experiment() -> str:
    """The shipped default experiment (PBT of ResNet-18 on CIFAR-10 on gavel-12)."""
    return str(shipped(DEFAULT_EXPERIMENT_NAME))


def resolve_config(arg: str) -> str:
    """A config path as given when it exists, else the shipped config it names, else as given.

    ``configs/experiments/x.toml`` (a checkout's path) and ``experiments/x.toml`` both name the
    shipped file, so the README's commands work from any folder once hetune is installed; a path
    that names nothing is returned unchanged so that the loader reports it as missing.

    Args:
        arg: a path typed by the user.
    """
    if not arg or Path(arg).expanduser().exists():
        return arg
    rel = Path(arg)
    if rel.is_absolute():
        return arg
    parts = rel.parts[1:] if rel.parts[:1] == ("configs",) else rel.parts
    candidate = shipped(str(Path(*parts))) if parts else None
    return str(candidate) if candidate is not None and candidate.is_file() else arg


def resolve_overrides(overrides: list[str]) -> list[str]:
    """``--set`` values of ``*.path`` keys resolved like :func:`resolve_config`; the rest unchanged."""
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip().endswith(".path"):
            item = f"{key}={resolve_config(value.strip())}"
        out.append(item)
    return out


def add_set_option(p: argparse.ArgumentParser) -> None:
    """Add ``--set dotted.key=value`` (repeatable) to a subcommand."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set cluster.path=configs/clusters/hrfs-lab.toml")
    p.add_argument("--plugin", dest="plugins", action="append", default=[], metavar="MODULE",
                   help="import your strategies and learning models first: a module name, a .py file or a package "
                        "folder (repeatable; docs/learning.md, README 'Adding a strategy')")


def add_force_option(p: argparse.ArgumentParser, what: str = "result") -> None:
    """Add ``--force``: replace an existing result, keeping the old one under a timestamped name."""
    p.add_argument("--force", action="store_true",
                   help=f"replace an existing {what} in --out (the old one is renamed <name>.replaced-<time>)")


def add_size_option(p: argparse.ArgumentParser) -> None:
    """Add ``--max-events``: the largest simulation (estimated events) that starts without asking."""
    from hetune.sim.size import DEFAULT_MAX_EVENTS

    p.add_argument("--max-events", type=int, default=DEFAULT_MAX_EVENTS,
                   help=f"refuse a simulation estimated past this many events (default {DEFAULT_MAX_EVENTS:,})")


def int_list(text: str) -> list[int]:
    """Parse "32,64,128" into integers (an argparse type)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


class MissingExtra(Exception):
    """A subcommand needs an optional dependency that is not installed."""


def require_torch(command: str) -> None:
    """Raise MissingExtra in one line unless torch and torchvision import.

    Args:
        command: the subcommand that needs them, named in the message.
    """
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"`hetune {command}` trains real networks and needs torch ({exc}); "
                           f"install them with: pip install 'hetune[real]'") from None


def positive(value: int, flag: str) -> None:
    """Refuse a count below 1 with a ConfigError naming the flag."""
    if value < 1:
        raise ConfigError(flag, "", f"must be >= 1, got {value}")
