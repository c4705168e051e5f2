"""An adaptation scenario: the [adapt] table of an experiment file (budget, resource changes, model,
work per epoch, and how measured time becomes the scenario's virtual time), and its data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import torch

from hetune.sim.errors import ConfigError
from hetune.sim.schema import from_mapping
from hetune.sim.tomlfile import read_toml


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
        # one yield per key with constant text: docs/config.md reads each key's range from here
        if self.budget_s <= 0:
            yield "budget_s", f"must be > 0, got {self.budget_s}"
        if self.start_offset_s < 0:
            yield "start_offset_s", f"must be >= 0, got {self.start_offset_s}"
        ups = [c for c in self.changes if c.change == "up"]
        if not ups:
            yield "changes", "need at least one {time, change = \"up\"}"
        elif not self.start_offset_s <= ups[0].time < self.start_offset_s + self.budget_s:
            yield "changes", f"the first up ({ups[0].time}) must fall inside the budget"
        if self.slow_factor < 1:
            yield "slow_factor", f"must be >= 1, got {self.slow_factor}"
        if self.time_scale <= 0:
            yield "time_scale", f"must be > 0, got {self.time_scale}"
        if self.image_size not in (8, 16, 32):
            yield "image_size", f"must be 32, 16 or 8, got {self.image_size}"
        if self.epoch_samples < 1:
            yield "epoch_samples", f"must be >= 1, got {self.epoch_samples}"
        if self.test_samples < 1:
            yield "test_samples", f"must be >= 1, got {self.test_samples}"
        if self.batch_size < 1:
            yield "batch_size", f"must be >= 1, got {self.batch_size}"
        if self.lr <= 0:
            yield "lr", f"must be > 0, got {self.lr}"
        if not 0.0 < self.lr_decay <= 1.0:
            yield "lr_decay", f"must be in (0, 1] (1: no decay), got {self.lr_decay}"
        if not 0.0 <= self.ema_decay < 1.0:
            yield "ema_decay", f"must be in [0, 1), got {self.ema_decay}"
        if self.signal <= 0:
            yield "signal", f"must be > 0, got {self.signal}"
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
    from hetune.sim.tomlfile import apply_overrides
    data = apply_overrides(read_toml(path), overrides or [])
    if "adapt" not in data:
        raise ConfigError(str(path), "adapt", "missing [adapt] table")
    extra = set(data) - {"adapt"}
    if extra:
        raise ConfigError(str(path), sorted(extra)[0], "unknown key (a scenario file holds only [adapt])")
    return from_mapping(Scenario, data["adapt"], str(path), "adapt")


def scenario_data(s: Scenario, seed: int, workdir: Path) -> tuple[torch.Tensor, ...]:
    """(train x, train y, test x, test y) of a scenario: its CIFAR folder, or synthetic CIFAR-format data
    written into ``workdir`` from ``seed``; images pooled down to ``image_size``."""
    from hetune.real.cifar import load_cifar, write_synthetic
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
