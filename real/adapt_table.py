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

What an epoch and an evaluation cost is measured once per model structure
(``EpochCost``: the fastest of interleaved timed rounds, times the steps per
epoch) before training starts, rather than per epoch: on a shared host the
wall time of each epoch jitters by tens of percent, which would change how
many epochs fit in the budget from one sequence to the next and drown the
differences the table exists to measure.

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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from real.adapt_csv import SEQUENCES
from real.net2net import SMALL_MODELS, deepen, deepened, prefixes
from sim.errors import ConfigError
from sim.schema import from_mapping
from sim.tomlfile import atomic_write_json, atomic_write_text, read_toml


@dataclass(frozen=True)
class Change:
    """A resource change.

    Args:
        time: seconds since the job's start.
        change: "up" (more GPU) or "down".
    """

    time: float
    change: Literal["up", "down"]


@dataclass(frozen=True)
class Scenario:
    """An adaptation scenario (the [adapt] table of an experiment file).

    Args:
        name: scenario name.
        model: "convnet2" or "convnet3".
        budget_s: the job's time budget, virtual seconds.
        start_offset_s: when the job starts, virtual seconds.
        changes: resource changes; the first "up" starts the decisions.
        slow_factor: cost multiplier of an epoch before the "up" (and after a "down").
        time_scale: virtual seconds per measured second (when ``base_epoch_s`` is 0).
        epoch_samples: training images per epoch.
        test_samples: test images per evaluation during training (charged to the budget).
        final_test_samples: test images the final accuracy is measured on, not charged (0 = the
            ``test_samples``). More images make the table less noisy: two models compared on 1,000
            images differ by about 1 accuracy point of sampling noise alone.
        batch_size: samples per step.
        lr: Adam learning rate.
        lr_decay: exponential decay of the learning rate per epoch.
        ema_decay: decay per training step of an exponential moving average of the weights (and
            batch-norm statistics) kept from the last decision on; the final accuracy is the
            average's (0 = the last weights'). The last weights' test accuracy swings by 2-4 points
            from one epoch to the next here, so where the budget happens to end adds that much noise
            to every row; the average smooths it. Updating the average is not charged (one
            weighted copy of the parameters per step, small against a training step).
        data_dir: CIFAR-10 folder ("" = a synthetic CIFAR-format dataset).
        signal: class signal of the synthetic data (smaller is harder).
        image_size: side of the images the model sees, pixels (32, 16 or 8); smaller images are
            CIFAR's average-pooled down, which makes a CPU-sized scenario 4x (16) cheaper per epoch.
        base_epoch_s: virtual seconds one training epoch of the base model costs on the fast device
            (after the up); every measured cost is scaled by base_epoch_s / the base epoch's measured
            seconds, so only the structures' relative costs come from the host. 0 = measured seconds x
            ``time_scale``: then a host twice as fast fits twice the epochs in the budget, and the
            table is another scenario (on a host twice as fast, 111 became the best of all five).
    """

    name: str
    model: Literal["convnet2", "convnet3"]
    budget_s: float = 400.0
    start_offset_s: float = 0.0
    changes: tuple[Change, ...] = ()
    slow_factor: float = 2.0
    time_scale: float = 100.0
    epoch_samples: int = 512
    test_samples: int = 500
    final_test_samples: int = 0
    batch_size: int = 64
    lr: float = 0.01
    lr_decay: float = 0.9
    ema_decay: float = 0.0
    data_dir: str = ""
    signal: float = 0.12
    image_size: int = 32
    base_epoch_s: float = 0.0

    def check(self) -> Iterator[tuple[str, str]]:
        if self.budget_s <= 0:
            yield "budget_s", f"must be > 0, got {self.budget_s}"
        ups = [c for c in self.changes if c.change == "up"]
        if not ups:
            yield "changes", "need at least one {time, change = \"up\"}"
        elif not self.start_offset_s <= ups[0].time < self.start_offset_s + self.budget_s:
            yield "changes", f"the first up ({ups[0].time}) must fall inside the budget"
        if self.slow_factor < 1 or self.time_scale <= 0:
            yield "slow_factor", "slow_factor must be >= 1 and time_scale > 0"
        if self.image_size not in (8, 16, 32):
            yield "image_size", f"must be 32, 16 or 8, got {self.image_size}"
        for k in ("epoch_samples", "test_samples", "batch_size"):
            if getattr(self, k) < 1:
                yield k, f"must be >= 1, got {getattr(self, k)}"
        if not 0.0 <= self.ema_decay < 1.0:
            yield "ema_decay", f"must be in [0, 1), got {self.ema_decay}"
        if self.base_epoch_s < 0:
            yield "base_epoch_s", f"must be >= 0 (0 = measured seconds x time_scale), got {self.base_epoch_s}"
        if self.final_test_samples < 0:
            yield "final_test_samples", f"must be >= 0, got {self.final_test_samples}"

    @property
    def final_samples(self) -> int:
        """Test images of the final accuracy (at least the evaluation's)."""
        return max(self.test_samples, self.final_test_samples)

    @property
    def up_time(self) -> float:
        return next(c.time for c in self.changes if c.change == "up")

    def factor_at(self, t: float) -> float:
        """Cost multiplier of work at virtual time ``t``: slow before the first up and after a down."""
        f = self.slow_factor
        for c in sorted(self.changes, key=lambda c: c.time):
            if c.time <= t:
                f = 1.0 if c.change == "up" else self.slow_factor
        return f


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read the [adapt] table of a scenario file."""
    from sim.tomlfile import apply_overrides
    data = apply_overrides(read_toml(path), overrides or [])
    if "adapt" not in data:
        raise ConfigError(str(path), "adapt", "missing [adapt] table")
    extra = set(data) - {"adapt"}
    if extra:
        raise ConfigError(str(path), sorted(extra)[0], "unknown key (a scenario file holds only [adapt])")
    return from_mapping(Scenario, data["adapt"], str(path), "adapt")


EVAL_BATCH = 256  # test images per forward pass when evaluating
# the scenario fields an epoch's and an evaluation's measured cost depends on (see EpochCost.conditions)
CLOCK_FIELDS = ("model", "image_size", "batch_size", "epoch_samples", "test_samples")
StructureKey = tuple[tuple[Any, ...], ...]


def structure_key(model: torch.nn.Module) -> StructureKey:
    """A model's structure: its parameters' names and shapes.

    Names place each layer: a layer added to block 0 or to block 1 has the same shapes.
    """
    return tuple((name, *p.shape) for name, p in model.named_parameters())


class EpochCost:
    """Measured cost of one training epoch and one evaluation, per model structure, in measured seconds.

    ``prime`` times every structure a table can reach in interleaved rounds (one
    training step and one evaluation of each structure per round) and keeps each
    structure's fastest round: a burst of load on a shared host then slows one round
    of every structure rather than all the measurements of one, and the minimum
    discards it. An epoch costs steps per epoch x the fastest training step; an
    evaluation, the fastest pass over one evaluation batch x (test images / batch).
    A structure met later without priming is timed on its own the same way.

    Args:
        scenario: the scenario (batch size, samples per epoch and per evaluation).
        rounds: timed rounds per structure.
    """

    def __init__(self, scenario: Scenario, rounds: int = 10) -> None:
        self.s = scenario
        self.rounds = rounds
        self._cache: dict[StructureKey, tuple[float, float]] = {}

    def __call__(self, model: torch.nn.Module, xtr: torch.Tensor, xte: torch.Tensor) -> tuple[float, float]:
        """(epoch seconds, evaluation seconds) of ``model``."""
        key = structure_key(model)
        if key not in self._cache:
            self.prime([model], xtr, xte)
        return self._cache[key]

    def prime(self, models: list[torch.nn.Module], xtr: torch.Tensor, xte: torch.Tensor) -> None:
        """Time every structure among ``models`` not yet timed, in interleaved rounds."""
        probes: dict[StructureKey, tuple[torch.nn.Module, torch.optim.Optimizer]] = {}
        for m in models:
            key = structure_key(m)
            if key not in self._cache and key not in probes:
                probe = copy.deepcopy(m)  # timing steps must not change a model being trained
                probes[key] = (probe, torch.optim.Adam(probe.parameters(), lr=0.0))
        x = xtr[: self.s.batch_size]
        y = torch.zeros(len(x), dtype=torch.long)
        xev = xte[:EVAL_BATCH]
        ev_scale = len(xte) / max(1, len(xev))
        best = {k: [math.inf, math.inf] for k in probes}
        for r in range(self.rounds + 1):  # round 0 warms up allocators and is discarded
            for key, (probe, opt) in probes.items():
                probe.train()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(probe(x), y).backward()
                opt.step()
                t1 = time.perf_counter()
                probe.eval()
                with torch.no_grad():
                    probe(xev)
                t2 = time.perf_counter()
                if r:
                    best[key] = [min(best[key][0], t1 - t0), min(best[key][1], t2 - t1)]
        steps = -(-self.s.epoch_samples // self.s.batch_size)
        for key, (step, ev) in best.items():
            self._cache[key] = (steps * step, ev_scale * ev)

    def conditions(self) -> dict[str, Any]:
        """What the costs depend on: the model and the work per step, epoch and evaluation.

        Scenarios that agree on these (the five of the issue differ only in the "up" time) can
        share one clock (``load_clock``), so their tables differ by the scenario alone and not by
        the load on the host while each was measured.
        """
        return {k: getattr(self.s, k) for k in CLOCK_FIELDS}

    def measured(self, model: torch.nn.Module) -> tuple[float, float] | None:
        """(epoch seconds, evaluation seconds) of ``model`` if measured, without measuring it."""
        return self._cache.get(structure_key(model))

    def to_json(self) -> dict[str, Any]:
        """The measured costs with the scenario they were measured for (``load`` checks it)."""
        return {"scenario": repr(self.s), "clock": self.conditions(), "rounds": self.rounds,
                "costs": [[repr(k), e, v] for k, (e, v) in self._cache.items()]}

    def load_clock(self, data: dict[str, Any], source: str) -> None:
        """Take a clock measured elsewhere (``hetune adapt clock``, or another table's cost file).

        Refused, with what differs, when it was measured for another model or other work per
        step, epoch or evaluation, or lacks a structure this scenario can reach.
        """
        theirs = data.get("clock")
        if not isinstance(theirs, dict):
            raise ConfigError(source, "clock", "has no measurement conditions: measure one with "
                              "`hetune adapt clock` (cost files of tables built before it lack them)")
        for k, v in self.conditions().items():
            if theirs.get(k) != v:
                raise ConfigError(source, f"clock.{k}", f"was measured for {theirs.get(k)!r}, this scenario has {v!r}")
        try:
            costs = {k: (float(e), float(v)) for k, e, v in data.get("costs", [])}
        except (TypeError, ValueError):
            raise ConfigError(source, "costs", "expected [structure, epoch seconds, evaluation seconds] rows") from None
        for m in reachable_models(self.s):
            key = structure_key(m)
            if repr(key) not in costs:
                raise ConfigError(source, "costs", "lacks a structure this scenario reaches")
            self._cache[key] = costs[repr(key)]
        self.rounds = int(data.get("rounds", self.rounds))  # recorded with the costs they gave

    def load(self, data: dict[str, Any], source: str) -> None:
        """Take the costs of an earlier build (``to_json``), so added repeats run on the same clock."""
        now = repr(self.s)
        # a build from before ema_decay existed scored the last weights: the same as ema_decay = 0;
        # one from before base_epoch_s existed charged measured seconds x time_scale: base_epoch_s = 0
        older = now.replace(", base_epoch_s=0.0)", ")") if self.s.base_epoch_s == 0.0 else now
        oldest = older.replace("ema_decay=0.0, ", "") if self.s.ema_decay == 0.0 else older
        if data.get("scenario") not in (now, older, oldest):
            raise ConfigError(source, "scenario", "was measured for another scenario than this one "
                              "(the scenario file or --set changed): build the table afresh without --resume")
        by_repr = {repr(structure_key(m)): structure_key(m) for m in reachable_models(self.s)}
        for k, e, v in data["costs"]:
            if k in by_repr:
                self._cache[by_repr[k]] = (float(e), float(v))


def read_clock(s: Scenario, path: str | Path) -> EpochCost:
    """The clock in ``path`` (``hetune adapt clock``'s file, or a table's cost file), checked against ``s``."""
    import json
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "", "no such clock file (write one with `hetune adapt clock`)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"not a JSON clock file ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", "not a clock file (expected a JSON object)")
    cost = EpochCost(s)
    cost.load_clock(data, str(path))
    return cost


def measure_clock(s: Scenario, rounds: int = 40, seed: int = 0) -> EpochCost:
    """Measure the cost of every structure ``s`` can reach, once, for several scenarios to share.

    Each table measuring its own clock lets the host's load while it was measured into the
    table: of the five scenario tables built here so, one (late) measured the base model's epoch
    13% dearer than a clock measured on a quiet host, and deepened models up to a third dearer
    still relative to it. More rounds than a table's own measurement, because the fastest round of
    each structure is what counts.
    """
    cost = EpochCost(s, rounds=rounds)
    with tempfile.TemporaryDirectory(prefix="hetune-clock-") as tmp:
        xtr, _, xte, _ = _data(s, seed, Path(tmp))
    torch.set_num_threads(1)  # as build_table trains
    cost.prime(reachable_models(s), xtr, xte[: s.test_samples])
    return cost


def reachable_models(s: Scenario) -> list[torch.nn.Module]:
    """The base model deepened by every prefix of every action sequence (85 models, ~20 structures)."""
    return [deepened(s.model, prefix) for depth in range(4) for prefix in prefixes(depth)]


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


def _data(s: Scenario, seed: int, workdir: Path) -> tuple[torch.Tensor, ...]:
    from real.cifar import load_cifar, write_synthetic
    if s.data_dir:
        xtr, ytr = load_cifar(s.data_dir, "cifar10", "train")
        xte, yte = load_cifar(s.data_dir, "cifar10", "test", limit=s.final_samples)
    else:
        d = write_synthetic(workdir, "cifar10", train=4 * s.epoch_samples, test=s.final_samples, seed=seed,
                            signal=s.signal)
        xtr, ytr = load_cifar(d, "cifar10", "train")
        xte, yte = load_cifar(d, "cifar10", "test")

    def t(x: np.ndarray) -> torch.Tensor:
        img = torch.as_tensor(x).permute(0, 3, 1, 2).float().div_(255.0)
        return torch.nn.functional.avg_pool2d(img, 32 // s.image_size) if s.image_size < 32 else img
    return t(xtr), torch.as_tensor(ytr).long(), t(xte), torch.as_tensor(yte).long()


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
            data = _data(s, seed + r, Path(tmp))
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
