"""Learning curves read for the skills fit (calibrate/skills_fit.py ``Curve``).

``csv_curves``: the long CSV format of ../shared/data/learning-curves/ (documented in docs/learning.md),
which users can write from their own logs.

``digits_runs``: the ``runs.json`` that ``bench/bench_digits.py`` writes (results/digits/): each run
at momentum 0.9 and batch 8 with its seed, a constant lr (``const``) or that lr divided by 10 from
``drop_at`` on (``drop``), and its readings.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from hetune.calibrate.skills_fit import Curve
from hetune.sim.errors import ConfigError


def digits_runs(path: str | Path, kinds: tuple[str, ...] = ("const", "drop")) -> list[Curve]:
    """The runs of a digits ``runs.json`` whose kind is in ``kinds``, named ``<kind>-lr<lr>[-at<drop>]-s<seed>``."""
    data = json.loads(Path(path).read_text())
    setup = data["meta"]["setup"]
    m, batch = float(setup["momentum"]), int(setup["batch"])
    out = []
    for r in data["runs"]:
        if r["kind"] not in kinds:
            continue
        # older files state the horizon and the drop once, in the setup
        n, lr = int(r.get("iterations", setup["iterations"])), float(r["lr"])
        if r["kind"] == "drop":
            at = int(r.get("drop_at", setup["drop_at"]))
            segs: tuple[tuple[float, float, int], ...] = ((lr, m, at), (lr / 10, m, n))
            name = f"drop-lr{lr:g}-at{at}-s{r['seed']}"
        else:
            segs = ((lr, m, n),)
            name = f"const-lr{lr:g}-s{r['seed']}"
        out.append(Curve(name, int(r["seed"]), segs, tuple((int(i), float(a)) for i, a, *_ in r["readings"]), batch))
    return out


CSV_COLUMNS = ("run_id", "learning_rate", "momentum", "batch_size", "seed", "epoch", "test_accuracy")


def schedule_factor(schedule: str, epoch: int, epochs: int) -> float:
    """The lr factor of training epoch ``epoch`` (0-based) under a named schedule of ``epochs`` epochs, as
    DeepOBS applies them (../shared/data/learning-curves/README.md): epoch n trains at base * f(n), f(0) = 1
    and f(n) = factor k = n; ``none`` constant, ``cosine`` 0.5 (1 + cos(pi k / epochs)), ``trapez`` a linear
    warm-up over the first tenth (0.1 k at 100 epochs), a plateau, and a linear decay over the last tenth."""
    if epoch == 0 or schedule == "none":
        return 1.0
    k = epoch
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * k / epochs))
    tenth = epochs / 10
    if k < tenth:
        return k / tenth
    if k <= epochs - tenth:
        return 1.0
    return 1.0 - (k - (epochs - tenth)) / (tenth + 1)


def csv_curves(path: str | Path, scale: float = 1.0) -> list[Curve]:
    """The runs of a long learning-curve CSV (one row per run and epoch; the columns of ``CSV_COLUMNS``, and
    optionally ``schedule`` (none, cosine, trapez), ``num_epochs``, ``diverged`` and ``lr``: the lr of the
    epoch that ends at the row, which overrides the schedule). Iterations are epochs. A run marked diverged
    is read up to the epoch where its stored curve falls back to its epoch-0 values (what follows is not a
    reading). Bad input: ConfigError naming the file, the row and what is wrong."""
    where = str(path)
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ConfigError(where, "", f"missing column(s) {', '.join(missing)} (needs {', '.join(CSV_COLUMNS)})")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(where, "", f"cannot read: {exc}") from None
    runs: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for n, row in enumerate(rows, start=2):
        runs.setdefault(row["run_id"], []).append((n, row))
    out = []
    for run, rs in runs.items():
        out.append(_csv_run(where, run, rs, scale))
    if not out:
        raise ConfigError(where, "", "no rows")
    return out


def _num(where: str, line: int, row: dict[str, str], key: str) -> float:
    try:
        v = float(row[key])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}:{line}", key, f"not a number: {row.get(key)!r}") from None
    if not math.isfinite(v):
        raise ConfigError(f"{where}:{line}", key, f"must be a finite number, got {row[key]!r}")
    return v


def _csv_run(where: str, run: str, rs: list[tuple[int, dict[str, str]]], scale: float) -> Curve:
    first_line, first = rs[0]
    base, m = _num(where, first_line, first, "learning_rate"), _num(where, first_line, first, "momentum")
    batch, seed = int(_num(where, first_line, first, "batch_size")), int(_num(where, first_line, first, "seed"))
    schedule = (first.get("schedule") or "none").strip()
    if schedule not in ("none", "cosine", "trapez"):
        raise ConfigError(f"{where}:{first_line}", "schedule", f"unknown schedule {schedule!r} (none, cosine, trapez; "
                                                               "or give each row's lr in an 'lr' column)")
    epochs_named = first.get("num_epochs")
    epochs = int(_num(where, first_line, first, "num_epochs")) if epochs_named else int(float(rs[-1][1]["epoch"]))
    readings: list[tuple[int, float]] = []
    segs: list[tuple[float, float, int]] = []
    diverged = (first.get("diverged") or "0").strip() in ("1", "true", "True")
    start: tuple[str, str | None] | None = None
    for line, row in rs:
        e = int(_num(where, line, row, "epoch"))
        if readings and e <= readings[-1][0]:
            raise ConfigError(f"{where}:{line}", "epoch", f"run {run!r}: epochs out of order ({e} after "
                                                          f"{readings[-1][0]})")
        if diverged and start is not None and (row["test_accuracy"], row.get("train_loss")) == start:
            break  # the stored curve fell back to its epoch-0 values: the run diverged before this row
        acc = _num(where, line, row, "test_accuracy") / scale
        if not 0.0 <= acc <= 1.0:
            raise ConfigError(f"{where}:{line}", "test_accuracy",
                              f"run {run!r}: {acc:g} is not a fraction in [0, 1] (a metric on another scale needs "
                              "--accuracy-scale)")
        if e == 0:
            start = (row["test_accuracy"], row.get("train_loss"))
        elif row.get("lr"):
            add_segment(segs, _num(where, line, row, "lr"), m, e)
        else:
            prev = readings[-1][0] if readings else 0
            for k in range(prev, e):
                add_segment(segs, base * schedule_factor(schedule, k, epochs), m, k + 1)
        readings.append((e, acc))
    if not segs:  # a run that diverged in its first epoch: its reading before training is all it has
        segs = [(base, m, 0)]
    return Curve(run, seed, tuple(segs), tuple(readings), batch)


def add_segment(segs: list[tuple[float, float, int]], lr: float, m: float, end: int) -> None:
    """Extend the last segment to ``end`` where its lr is the same, else start another."""
    if segs and segs[-1][0] == lr and segs[-1][1] == m:
        segs[-1] = (lr, m, end)
    else:
        segs.append((lr, m, end))


def drop_prefixes(curves: list[Curve]) -> list[Curve]:
    """``curves`` less every curve that is a prefix of another, reading for reading at the same learning
    rates (a shorter design's run that a longer one repeats: the digits 600-iteration constants are the
    1,000-iteration ones' first readings), so that no reading is fitted twice."""
    def lrs(c: Curve) -> list[tuple[float, float]]:
        out, segs = [], list(c.segments)
        for it, _ in c.readings:
            seg = next((s for s in segs if s[2] >= it), segs[-1])
            out.append((seg[0], seg[1]))
        return out

    keep = []
    for i, a in enumerate(curves):
        n = len(a.readings)
        covered = any(j != i and b.seed == a.seed and b.batch == a.batch and len(b.readings) >= n
                      and (len(b.readings) > n or j < i) and b.readings[:n] == a.readings and lrs(b)[:n] == lrs(a)
                      for j, b in enumerate(curves))
        if not covered:
            keep.append(a)
    return keep
