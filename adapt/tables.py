"""The adaptation table: one row per action sequence (a1, a2, a3), read and validated strictly."""

from __future__ import annotations

import csv
import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from hetune.sim.errors import ConfigError

REQUIRED = ("a1", "a2", "a3", "t1", "t2", "t3", "total_time", "acc")
SEQUENCES: list[tuple[int, int, int]] = [(a, b, c) for a, b, c in itertools.product(range(4), repeat=3)]  # 64


@dataclass(frozen=True)
class Row:
    """One action sequence's outcome.

    Args:
        actions: (a1, a2, a3); 0-2 deepen that block, 3 do nothing.
        times_left: seconds left in the budget at each decision.
        total_time: the budget, seconds.
        acc: final test accuracy in [0, 1].
        acc_se: standard error of ``acc`` over the build's repeats (optional ``acc_se`` column; nan if absent).
        runs: each repeat's accuracy (optional ``acc_runs`` column, space-separated; empty if absent).
            Repeat k of every row shares data and batch order, so row differences pair up by repeat.
    """

    actions: tuple[int, int, int]
    times_left: tuple[float, float, float]
    total_time: float
    acc: float
    acc_se: float = math.nan
    runs: tuple[float, ...] = ()


@dataclass(frozen=True)
class Table:
    """A scenario's table.

    Args:
        rows: by action sequence.
        model: base model name.
        source: file name.
    """

    rows: dict[tuple[int, int, int], Row]
    model: str
    source: str

    def rank(self, actions: tuple[int, int, int]) -> int:
        """1 + the number of sequences with a strictly higher accuracy (1 = best)."""
        acc = self.rows[actions].acc
        return 1 + sum(1 for r in self.rows.values() if r.acc > acc)

    def best(self) -> Row:
        return max(self.rows.values(), key=lambda r: (r.acc, [-a for a in r.actions]))

    def gap(self, better: tuple[int, int, int], other: tuple[int, int, int]) -> tuple[float, float]:
        """How much ``better``'s accuracy exceeds ``other``'s, and the standard error of that difference.

        Paired repeat by repeat when both rows have 2+ matching ``runs`` (the noise of a difference
        between sequences trained on the same data and batch order), else from the two ``acc_se``
        as if independent; the error is nan when the table says nothing about its noise.
        """
        a, b = self.rows[better], self.rows[other]
        if len(a.runs) == len(b.runs) >= 2:
            d = [x - y for x, y in zip(a.runs, b.runs)]
            return a.acc - b.acc, statistics.stdev(d) / math.sqrt(len(d))
        return a.acc - b.acc, math.hypot(a.acc_se, b.acc_se)


def read_table(path: str | Path, model: str = "") -> Table:
    """Read and validate a table; a bad row is refused with its line number.

    Args:
        path: the CSV file.
        model: base model name when the file has no ``model`` column (--model).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "", "file not found")
    rows: dict[tuple[int, int, int], Row] = {}
    models = set()
    with p.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(str(p), "", f"missing column(s) {', '.join(missing)} (need {', '.join(REQUIRED)})")
        for n, raw in enumerate(reader, 2):
            where = f"{p}:{n}"
            try:
                actions = (int(raw["a1"]), int(raw["a2"]), int(raw["a3"]))
            except (TypeError, ValueError):
                raise ConfigError(where, "a1..a3", f"actions must be integers 0-3, got "
                                  f"{raw['a1']!r}, {raw['a2']!r}, {raw['a3']!r}") from None
            if any(a not in range(4) for a in actions):
                raise ConfigError(where, "a1..a3", f"actions must be 0-3, got {actions}")
            try:
                times = tuple(float(raw[k]) for k in ("t1", "t2", "t3"))
                total, acc = float(raw["total_time"]), float(raw["acc"])
            except (TypeError, ValueError):
                raise ConfigError(where, "", "t1, t2, t3, total_time and acc must be numbers") from None
            if not 0.0 <= acc <= 1.0:
                raise ConfigError(where, "acc", f"must be in [0, 1], got {acc}")
            if actions in rows:
                raise ConfigError(where, "", f"sequence {actions} appears twice")
            se, runs = _noise(where, raw)
            rows[actions] = Row(actions, times, total, acc, se, runs)  # type: ignore[arg-type]  # times: 3 floats
            if raw.get("model"):
                models.add(raw["model"])
    absent = [s for s in SEQUENCES if s not in rows]
    if absent:
        raise ConfigError(str(p), "", f"{len(absent)} of 64 action sequences missing, e.g. {absent[0]}")
    if len(models) > 1:
        raise ConfigError(str(p), "model", f"one base model per table, got {sorted(models)}")
    name = models.pop() if models else model
    if not name:
        raise ConfigError(str(p), "model", "no model column: name the base model with --model")
    return Table(rows, name, str(p))


def _noise(where: str, raw: dict[str, str]) -> tuple[float, tuple[float, ...]]:
    """The optional ``acc_se`` and ``acc_runs`` of a row; present but not numbers in range is refused."""
    se = math.nan
    if (raw.get("acc_se") or "").strip().lower() not in ("", "nan"):
        try:
            se = float(raw["acc_se"])
        except ValueError:
            raise ConfigError(where, "acc_se", f"must be a number, got {raw['acc_se']!r}") from None
        if not se >= 0.0:
            raise ConfigError(where, "acc_se", f"must be >= 0, got {se}")
    try:
        runs = tuple(float(a) for a in (raw.get("acc_runs") or "").split())
    except ValueError:
        raise ConfigError(where, "acc_runs",
                          f"must be accuracies separated by spaces, got {raw['acc_runs']!r}") from None
    if any(not 0.0 <= a <= 1.0 for a in runs):
        raise ConfigError(where, "acc_runs", "each repeat's accuracy must be in [0, 1]")
    return se, runs
