"""``hetune adapt build-table``: train every action sequence of a scenario for real and tabulate outcomes.

A job (model, data, time budget) starts at ``start_offset_s`` and trains epoch by
epoch; the scheduler's resource changes alter how much budget an epoch costs:
before an "up" the job has fewer GPUs, emulated by charging ``slow_factor`` x
the measured time of an epoch. Time spent evaluating counts against the
budget. Time is virtual: measured seconds x a scale (so a scaled-down
scenario runs in minutes on a CPU while keeping the shape of the original
400-s budget). The scale is ``base_epoch_s`` / the base model's measured epoch
when the scenario sets ``base_epoch_s``, so it holds as many epochs on a fast
host as on a slow one; else it is ``time_scale``.

What an epoch and an evaluation cost comes from ``adapt.clock`` (measured
once per model structure, before training); the scenario and its data from
``adapt.scenario``.

All 64 sequences start from the same weights, pre-trained for
the time before the first "up"; after the up, an agent's decision (deepen
block 0, 1, 2, or nothing) precedes each of the next 3 epochs, then training
continues until the budget is spent; the final test accuracy is recorded.
"""

from __future__ import annotations

import copy
import csv
import io
import math
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from hetune.adapt.clock import EVAL_BATCH, EpochCost, reachable_models
from hetune.adapt.tables import SEQUENCES
from hetune.adapt.scenario import Scenario, scenario_data
from hetune.adapt.net2net import SMALL_MODELS, deepen
from hetune.sim.errors import ConfigError
from hetune.sim.tomlfile import atomic_write_json, atomic_write_text


class Job:
    """Trains a model under the scenario's clock.

    Args:
        scenario: the scenario.
        data: (train x, train y, test x, test y) tensors.
        seed: seed of the batch order.
        cost: the per-structure cost model (shared across the jobs of a table).
    """

    def __init__(self, scenario: Scenario, data: tuple[torch.Tensor, ...], seed: int,
                 cost: EpochCost | None = None) -> None:
        self.s = scenario
        self.xtr, self.ytr, xte, yte = data
        self.final_x, self.final_y = xte, yte  # the final accuracy's images (uncharged)
        self.xte, self.yte = xte[: scenario.test_samples], yte[: scenario.test_samples]
        self.gen = torch.Generator().manual_seed(seed)
        self.clock = scenario.start_offset_s
        self.epoch = 0
        self.cost = cost or EpochCost(scenario)
        self._scale = 0.0

    @property
    def end(self) -> float:
        return self.s.start_offset_s + self.s.budget_s

    def fork(self) -> "Job":
        """A copy at the same clock, epoch and place in the batch order, sharing data and cost model."""
        other = copy.copy(self)
        other.gen = torch.Generator()
        other.gen.set_state(self.gen.get_state())
        return other

    def moving_average(self, model: torch.nn.Module) -> AveragedModel | None:
        """A moving average of ``model``'s weights and batch-norm statistics (None when ``ema_decay`` is 0)."""
        if self.s.ema_decay <= 0:
            return None
        return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(self.s.ema_decay), use_buffers=True)

    def _charge(self, seconds: float) -> None:
        self.clock += seconds * self.scale * self.s.factor_at(self.clock)

    @property
    def scale(self) -> float:
        """Virtual seconds per measured second: ``base_epoch_s`` / the base model's measured epoch, else
        ``time_scale``."""
        if self.s.base_epoch_s <= 0:
            return self.s.time_scale
        if not self._scale:  # the base model's cost never changes once measured (or loaded)
            self._scale = self.s.base_epoch_s / self.cost(SMALL_MODELS[self.s.model](), self.xtr, self.xte)[0]
        return self._scale

    def train_epoch(self, model: torch.nn.Module, opt: torch.optim.Optimizer,
                    ema: AveragedModel | None = None) -> None:
        """Train one epoch (and update ``ema``, a moving average of ``model``, after every step)."""
        seconds = self.cost(model, self.xtr, self.xte)[0]
        model.train()
        idx = torch.randperm(len(self.ytr), generator=self.gen)[: self.s.epoch_samples]
        for i in range(0, len(idx), self.s.batch_size):
            b = idx[i:i + self.s.batch_size]
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(self.xtr[b]), self.ytr[b]).backward()
            opt.step()
            if ema is not None:
                ema.update_parameters(model)
        for g in opt.param_groups:  # exponential decay per epoch
            g["lr"] *= self.s.lr_decay
        self.epoch += 1
        self._charge(seconds)

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> float:
        seconds = self.cost(model, self.xtr, self.xte)[1]
        model.eval()
        acc = _accuracy(model, self.xte, self.yte)
        self._charge(seconds)
        return acc


def cost_path(out: Path) -> Path:
    """Where a table's measured cost model is kept (next to the CSV), for ``--resume``."""
    return out.with_suffix(".cost.json")


def build_table(s: Scenario, out: Path, repeats: int = 1, seed: int = 0,
                progress: Callable[[int, int], Any] | None = None, resume: bool = False,
                clock: EpochCost | None = None) -> list[dict[str, Any]]:
    """Train all 64 sequences ``repeats`` times and write the CSV atomically (after every repeat).

    Args:
        s: the scenario.
        out: CSV path; the measured cost model goes next to it (``cost_path``).
        repeats: seeds per sequence; acc and times are averaged.
        seed: first seed.
        progress: called with (done, total).
        resume: keep the repeats already in ``out`` (built with the same scenario and seed) and
            add repeats up to ``repeats``, on the clock measured then.
        clock: a cost model measured beforehand (``measure_clock``, ``EpochCost.load_clock``), shared
            with other scenarios; None measures one for this table.
    """
    torch.set_num_threads(1)
    sums: dict[tuple[int, int, int], np.ndarray] = {seq: np.zeros(5) for seq in SEQUENCES}
    accs: dict[tuple[int, int, int], list[float]] = {seq: [] for seq in SEQUENCES}
    if clock is not None and resume:
        raise ConfigError("--clock", "", "a resumed table keeps the clock it was built on: leave out --clock")
    cost = clock or EpochCost(s)  # one cost model for every repeat, so all repeats share one clock
    first = _resume(s, out, seed, sums, accs, cost) if resume else 0
    if first >= repeats:
        raise ConfigError(str(out), "repeats", f"already has {first} repeats; ask for more with --repeats")
    total = (repeats - first) * len(SEQUENCES)
    done = 0
    for r in range(first, repeats):
        torch.manual_seed(seed + r)
        with tempfile.TemporaryDirectory(prefix="hetune-adapt-") as tmp:  # synthetic data, read into memory
            data = scenario_data(s, seed + r, Path(tmp))
        if r == first and not resume:
            if clock is None:
                cost.prime(reachable_models(s), data[0], data[2][: s.test_samples])
            atomic_write_json(cost_path(out), dict(cost.to_json(), seed=seed))
        base = SMALL_MODELS[s.model]()
        base_opt = torch.optim.Adam(base.parameters(), lr=s.lr)
        pre = Job(s, data, seed + r, cost)
        while pre.clock < s.up_time:  # pre-training up to the "up", shared by every sequence
            pre.train_epoch(base, base_opt)
            pre.evaluate(base)
        job = Job(s, data, seed + r + 1, cost)  # every sequence sees one batch order after the up
        job.clock, job.epoch = pre.clock, pre.epoch
        for seq, times, acc in _play_sequences(base, job, base_opt.param_groups[0]["lr"], data[0][:256]):
            sums[seq] += np.array([*times, s.budget_s, acc])
            accs[seq].append(acc)
            done += 1
            if progress:
                progress(done, total)
        # written after every repeat, so a long build (a GPU's full scenario) leaves a usable table
        rows = _write_table(s, out, sums, accs, r + 1, seed)
    return rows


def _play_sequences(model: torch.nn.Module, job: Job, lr: float, bn_data: torch.Tensor,
                    prefix: tuple[int, ...] = (), times: tuple[float, ...] = ()
                    ) -> Iterator[tuple[tuple[int, int, int], tuple[float, ...], float]]:
    """Play every action sequence that extends ``prefix`` from ``model`` at ``job``'s clock.

    Yields (sequence, seconds left at each decision, final accuracy) in the order of
    ``SEQUENCES``. Sequences that share a prefix share its epochs: the model, the clock
    and the batch order after a prefix are forked rather than trained again, which
    gives the same numbers as training each sequence on its own (everything here is
    deterministic given the job's generator) and saves 108 of the 64 x (epochs left)
    epochs: one repeat of the late scenario took 88 s instead of 123 s here (the
    pre-training before the up is shared either way).

    Args:
        model: the model after ``prefix`` (not changed: each branch works on a copy).
        job: the job's clock and batch order after ``prefix`` (not changed).
        lr: the learning rate reached after ``prefix``.
        bn_data: images to re-estimate batch-norm statistics on after a deepening.
    """
    for a in range(4):
        m, j = copy.deepcopy(model), job.fork()
        left = (*times, max(0.0, j.end - j.clock))
        deepen(m, a, data=[bn_data])
        # a fresh optimizer over the (possibly larger) model, at the decayed lr
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        seq = (*prefix, a)
        last = len(seq) == 3
        # the moving average starts at the last decision: the structure is final from there on
        ema = j.moving_average(m) if last else None
        if j.clock < j.end:
            j.train_epoch(m, opt, ema)
            j.evaluate(m)
        if not last:
            yield from _play_sequences(m, j, opt.param_groups[0]["lr"], bn_data, seq, left)
            continue
        while j.clock < j.end:  # the last decision's optimizer trains on to the end of the budget
            j.train_epoch(m, opt, ema)
            j.evaluate(m)
        yield seq, left, _last_acc(j, ema.module if ema is not None else m)  # type: ignore[misc]


def _resume(s: Scenario, out: Path, seed: int, sums: dict[tuple[int, int, int], np.ndarray],
            accs: dict[tuple[int, int, int], list[float]], cost: EpochCost) -> int:
    """Fill ``sums``, ``accs`` and ``cost`` from an earlier build of ``out``; returns its repeats."""
    import json
    cpath = cost_path(out)
    if not out.is_file() or not cpath.is_file():
        raise ConfigError(str(out), "", f"nothing to resume: needs this table and {cpath.name} "
                          "from an earlier `hetune adapt build-table`")
    saved = json.loads(cpath.read_text())
    if saved.get("seed") != seed:
        raise ConfigError(str(cpath), "seed", f"the table was built from seed {saved.get('seed')}, not {seed}")
    cost.load(saved, str(cpath))
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows, start=2):
        if "acc_runs" not in row or row.get("scenario") != s.name:
            raise ConfigError(f"{out}:{i}", "acc_runs", f"not a table of scenario {s.name!r} with acc_runs")
        seq = (int(row["a1"]), int(row["a2"]), int(row["a3"]))
        accs[seq] = [float(a) for a in row["acc_runs"].split()]
        n = len(accs[seq])
        # every repeat runs on the same clock, so its times left are the table's means
        sums[seq] += np.array([float(row["t1"]) * n, float(row["t2"]) * n, float(row["t3"]) * n,
                               float(row["total_time"]) * n, sum(accs[seq])])
    counts = {len(a) for a in accs.values()}
    if len(rows) != len(SEQUENCES) or len(counts) != 1:
        raise ConfigError(str(out), "acc_runs", "needs all 64 sequences with the same number of repeats")
    return counts.pop()


def _write_table(s: Scenario, out: Path, sums: dict[tuple[int, int, int], np.ndarray],
                 accs: dict[tuple[int, int, int], list[float]], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Average ``repeats`` repeats into one row per sequence and write the CSV atomically."""
    rows = []
    for seq in SEQUENCES:
        m = sums[seq] / repeats
        rows.append({"a1": seq[0], "a2": seq[1], "a3": seq[2], "t1": round(m[0], 3), "t2": round(m[1], 3),
                     "t3": round(m[2], 3), "total_time": round(m[3], 3), "acc": round(m[4], 5),
                     # the standard error of acc: how far apart two rows must be to be told apart
                     "acc_se": round(float(np.std(accs[seq], ddof=1) / math.sqrt(repeats)), 5)
                     if repeats > 1 else "",
                     # each repeat's accuracy: repeats share their data and batch order across sequences,
                     # so differences between two rows are best judged repeat by repeat (paired)
                     "acc_runs": " ".join(f"{a:.5f}" for a in accs[seq]),
                     "model": s.model, "scenario": s.name, "repeats": repeats, "seed": seed})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, buf.getvalue())
    return rows


@torch.no_grad()
def _last_acc(job: Job, model: torch.nn.Module) -> float:
    # the accuracy of the final model, not charged: the budget is already spent
    model.eval()
    return _accuracy(model, job.final_x, job.final_y)


@torch.no_grad()
def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    # batches of EVAL_BATCH images, as a data loader would, so evaluation time is linear in images
    hits = sum(int((model(x[i:i + EVAL_BATCH]).argmax(1) == y[i:i + EVAL_BATCH]).sum())
               for i in range(0, len(x), EVAL_BATCH))
    return hits / len(x)
