"""A Ray Tune experiment folder as trial histories (calibrate/histories.py), so that a user's past
Tuner runs serve as data for the learning-model fit.

What Ray Tune 2.60 leaves in an experiment folder (``storage_path/<name>/``), and what is read:

- one folder per trial holding ``params.json`` (the initial config only) and ``result.json`` (one
  JSON result per line, each with ``training_iteration``, ``trial_id``, ``experiment_tag`` and the
  ``config`` the trial ran that result with, so explored configs show);
- for PBT, ``pbt_global.txt``: one line per exploit, in the order they happened,
  ``[target tag, donor tag, target iteration, donor iteration, donor config, new config]``
  (ray/tune/schedulers/pbt.py ``_log_config_on_step``), the tags being the trials' original
  ``experiment_tag``. The per-trial ``pbt_policy_<id>.txt`` files repeat these lines.

Where a segment starts. A policy line says which trial exploited which, and at which of the target's
results PBT decided; the target's results may run on a little past it (a result in flight). Its first
result that breaks its stride (the iterations between its results, 1 for a class trainable reporting
every step) or comes with another (lr, momentum) is the first after the exploit, restored from the
donor's checkpoint one stride earlier (the donor's latest checkpoint, which may be older than the
donor iteration the line records).

Readings: hetune's trainables mark evaluations (``eval_s`` > 0); for other trainables a result whose
metric differs from the trial's previous one is an evaluation (a trainable that evaluates every k
iterations repeats its last value in between). A reading's loss is the mean of the loss over the last
quarter of the results since the previous reading (a training loss per step is one mini-batch: too
noisy alone). A segment's last result closes it as a reading without accuracy.
"""

from __future__ import annotations

import json
import math
import sys
import re
from pathlib import Path
from typing import Any

from hetune.calibrate.histories import History, Origin, Reading, Segment, _lr_momentum
from hetune.sim.errors import ConfigError


def is_tune_folder(path: Path) -> bool:
    """Does ``path`` look like a Ray Tune experiment folder (trial folders with result.json)?"""
    return path.is_dir() and any(p.is_dir() and (p / "result.json").is_file() for p in path.iterdir())


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot read ({type(exc).__name__})") from None
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            int(row["training_iteration"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if n == last and n > 1 and not line.rstrip().endswith("}"):
                # a trial that crashed while writing: what it reported before is kept, and said
                print(f"hetune: warning: {path}:{n}: a truncated last result, read up to the line before it",
                      file=sys.stderr)
                break
            raise ConfigError(f"{path}:{n}", "", "not a Ray Tune result (JSON with training_iteration)") from None
        rows.append(row)
    return rows


def _number(row: dict[str, Any], key: str, where: str) -> float | None:
    v = row.get(key)
    if v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ConfigError(where, key, f"not a number: {v!r}") from None
    return x if math.isfinite(x) else None


def read_tune_folder(folder: Path, run: str, metric: str = "accuracy", loss_metric: str = "loss",
                     batch: int | None = None, momentum: float | None = None) -> list[History]:
    """Histories of every trial in a Ray Tune experiment folder.

    Args:
        folder: the experiment folder.
        run: a name for this run, unique among the runs fitted together.
        metric: the accuracy key of the results (a fraction in [0, 1]).
        loss_metric: the training-loss key (used where present).
        batch: the global batch when the configs hold no ``batch_size``.
        momentum: used where a config holds no momentum.
    """
    trials: dict[str, list[dict[str, Any]]] = {}
    tags: dict[str, str] = {}
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "result.json").is_file()):
        rows = _rows(d / "result.json")
        if not rows:
            continue
        tid = str(rows[0].get("trial_id") or d.name)
        trials[tid] = rows
        for tag in _tags(rows[0], d.name, tid):
            tags[tag] = tid
    if not trials:
        raise ConfigError(str(folder), "", "no trial folders with result.json: not a Ray Tune experiment folder")
    _all_fields_there(folder, trials, metric, batch, momentum)
    lines = _policy(folder / "pbt_global.txt", tags)
    out: dict[str, History] = {}
    pending: dict[str, list[tuple[int, str, int]]] = {t: [] for t in trials}
    for target, donor, t_iter, d_iter in lines:
        pending[target].append((t_iter, donor, d_iter))
    # Exploits happen in pbt_global.txt's order: replay trials row by row, and a target's segment
    # starts from its donor's segment as it stood at that line (count the donor's earlier exploits).
    seg_of_donor: list[int] = []
    counts: dict[str, int] = {t: 0 for t in trials}
    for target, donor, _, _ in lines:
        seg_of_donor.append(counts[donor])
        counts[target] += 1
    k_of: dict[str, int] = {t: 0 for t in trials}
    _warn_not_finite(folder, trials, metric)
    line_index = {t: [i for i, ln in enumerate(lines) if ln[0] == t] for t in trials}
    for tid, rows in trials.items():
        where = str(folder / tid)
        b = batch or _batch(rows[0], where)
        h = out[tid] = History(f"{run}/{tid}", b, str(folder))
        prev_metric: float | None = None
        chunk: list[dict[str, Any]] = []
        armed = False  # the trial has passed the iteration of its next exploit's policy line
        last, prev_it = (math.nan, math.nan), 0  # the previous result's (lr, momentum) and iteration
        stride = 1  # iterations between the trial's results (1 for a class trainable reporting every step)
        for i, row in enumerate(rows):
            it = int(row["training_iteration"])
            lr, m = _lr_momentum(row.get("config") or {}, momentum, f"{where} result {it}")
            if armed and (it != prev_it + stride or (lr, m) != last):
                # the first result after the exploit: restored from the donor's checkpoint one stride back
                _close(h, chunk, loss_metric, momentum, where)
                _, donor, _ = pending[tid][k_of[tid]]
                seg = seg_of_donor[line_index[tid][k_of[tid]]]
                h.segments.append(Segment(it - stride, Origin(f"{run}/{donor}", it - stride, seg)))
                k_of[tid] += 1
                armed, prev_metric, chunk = False, None, []
            chunk.append(row)
            stride = it - prev_it if 0 < it - prev_it and prev_it else stride
            last, prev_it = (lr, m), it
            acc = _number(row, metric, where)
            if acc is not None and _evaluated(row, acc, prev_metric):
                h.segments[-1].readings.append(Reading(it, lr, m, acc, _loss(chunk, loss_metric, where)))
                prev_metric, chunk = acc, []
            if k_of[tid] < len(pending[tid]) and it >= pending[tid][k_of[tid]][0]:
                armed = True
        _close(h, chunk, loss_metric, momentum, where)
    return list(out.values())


def _warn_not_finite(folder: Path, trials: dict[str, list[dict[str, Any]]], metric: str) -> None:
    """One warning line where results report the metric as NaN or infinite (left out of the fit)."""
    bad = {tid: sum(1 for r in rows if isinstance(r.get(metric), (int, float)) and not math.isfinite(r[metric]))
           for tid, rows in trials.items()}
    bad = {t: n for t, n in bad.items() if n}
    if bad:
        print(f"hetune: warning: {folder}: {sum(bad.values())} result(s) of {len(bad)} trial(s) report {metric!r} as "
              f"NaN or infinite ({', '.join(sorted(bad)[:3])}{', ...' if len(bad) > 3 else ''}); left out of the fit",
              file=sys.stderr)


def _all_fields_there(folder: Path, trials: dict[str, list[dict[str, Any]]], metric: str, batch: int | None,
                      momentum: float | None) -> None:
    """One ConfigError naming every field the fit needs that some trial lacks, with the flag that supplies it
    (a user fixing one field at a time would otherwise run the command once per field)."""
    lacking: dict[str, int] = {}
    for rows in trials.values():
        config = rows[0].get("config") or {}
        needs = [(not any(r.get(metric) is not None for r in rows), f"{metric!r} in any result (--metric)"),
                 ("lr" not in config, "'lr' in the config"),
                 (momentum is None and "momentum" not in config, "'momentum' in the config (--momentum)"),
                 (batch is None and config.get("batch_size", (config.get("_hetune") or {}).get("batch_size")) is None,
                  "'batch_size' in the config (--batch-size)")]
        for missing, what in needs:
            if missing:
                lacking[what] = lacking.get(what, 0) + 1
    if lacking:
        raise ConfigError(str(folder), "", "missing " + "; ".join(f"{what} in {n} of {len(trials)} trial(s)"
                                                                  for what, n in lacking.items()))


def _evaluated(row: dict[str, Any], acc: float, prev: float | None) -> bool:
    """Is this result an evaluation? hetune's trainables say so (``eval_s`` > 0); for others, a
    result whose metric changed is one (a trainable that evaluates every k iterations repeats its
    last value in between)."""
    if "eval_s" in row:
        return bool(float(row.get("eval_s") or 0.0) > 0)
    return acc != prev


def _close(h: History, chunk: list[dict[str, Any]], loss_metric: str, momentum: float | None, where: str) -> None:
    """End the segment at the last result (a reading without accuracy, so that the segment's
    iterations, which a donor checkpoint may lie in, are all known)."""
    if chunk:
        row = chunk[-1]
        lr, m = _lr_momentum(row.get("config") or {}, momentum, where)
        h.segments[-1].readings.append(Reading(int(row["training_iteration"]), lr, m, None,
                                               _loss(chunk, loss_metric, where)))


def _tags(row: dict[str, Any], dirname: str, tid: str) -> list[str]:
    """The trial's original experiment tag, as pbt_global.txt names it: from its results where Tune
    wrote one (before PBT's "@perturbed" suffix), else from its folder's name,
    ``<trainable>_<trial id>_<tag>_<date>_<time>`` (Tune may shorten a long one: then only the
    results' tag matches)."""
    out = []
    if row.get("experiment_tag"):
        out.append(str(row["experiment_tag"]).split("@perturbed")[0])
    m = re.match(rf".*?_{re.escape(tid)}_(.*)_\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d$", dirname)
    if m:
        out.append(m.group(1))
    return out


def _loss(chunk: list[dict[str, Any]], key: str, where: str) -> float | None:
    values = [v for v in (_number(r, key, where) for r in chunk[-max(1, len(chunk) // 4):]) if v is not None]
    return sum(values) / len(values) if values else None


def _batch(row: dict[str, Any], where: str) -> int:
    config = row.get("config") or {}
    # hetune's own runs keep the batch in their fixed settings (real/trainable.py SETUP_KEY)
    b = config.get("batch_size", (config.get("_hetune") or {}).get("batch_size"))
    if b is None:
        raise ConfigError(where, "batch_size", "no 'batch_size' in the config: pass --batch-size with the global "
                                               "batch the runs used")
    try:
        return int(b)
    except (TypeError, ValueError):
        raise ConfigError(where, "batch_size", f"not an integer: {b!r}") from None


def _policy(path: Path, tags: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(target trial id, donor trial id, target iteration, donor iteration) per pbt_global.txt line."""
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            target, donor, t_iter, d_iter = json.loads(line)[:4]
            out.append((tags[str(target)], tags[str(donor)], int(t_iter), int(d_iter)))
        except (json.JSONDecodeError, ValueError, TypeError):
            raise ConfigError(f"{path}:{n}", "", "not a PBT policy line [target, donor, iteration, "
                                                 "iteration, config, config]") from None
        except KeyError as exc:
            tag = str(exc.args[0])
            csv_only = [d.name for d in path.parent.iterdir() if d.is_dir() and tag in d.name
                        and (d / "progress.csv").is_file() and not (d / "result.json").is_file()]
            if csv_only:  # the folder is there: say what is missing from it
                raise ConfigError(str(path.parent / csv_only[0]), "", f"trial {tag} has progress.csv but no "
                                  "result.json, which hetune reads (Ray Tune writes it unless its JSON logger "
                                  "callback was turned off)") from None
            raise ConfigError(f"{path}:{n}", "", f"names a trial with no result folder: {tag}") from None
    return out
