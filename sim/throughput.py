"""Step-time models read from a calibration file.

A model is a pure function of (model, device type, batch size, device count):

    step_time_s(batch, n) = (alpha_s + beta_s_per_sample * batch) * scale(n)

For GPU types ``n`` is the number of GPUs of a data-parallel worker and
``scale(n) = 1 / (1 + (n - 1) * multi_device_efficiency)``: each extra GPU adds
``multi_device_efficiency`` of one GPU's throughput.

For CPU types ``n`` is the number of cores a worker gets. Step time follows
Amdahl's law around the core count it was measured with:

    scale(n) = (1 - parallel_fraction) + parallel_fraction * reference_cores / n
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from hetune.sim.errors import ConfigError
from hetune.sim.schema import from_mapping
from hetune.sim.surrogate import SurrogateParams
from hetune.sim.tomlfile import read_toml


@dataclass(frozen=True)
class DeviceModel:
    """Measured or fitted costs of one model on one device type.

    Args:
        alpha_s: fixed seconds per training step.
        beta_s_per_sample: seconds per sample per step.
        eval_s: seconds for one evaluation pass on the test set.
        checkpoint_mb: checkpoint size, in MB (weights + optimizer state).
        save_s: seconds to save a checkpoint.
        load_s: seconds to load a checkpoint.
        start_overhead_s: seconds to start or resume a trial (process, model build).
        multi_device_efficiency: GPU types: throughput each extra GPU adds, as a fraction of one.
        reference_cores: CPU types: the core count alpha and beta were measured with.
        parallel_fraction: CPU types: Amdahl parallel fraction in [0, 1].
        r2: goodness of the alpha/beta fit (1 = perfect), when fitted.
        source: "measured", "published" or "fitted".
    """

    alpha_s: float
    beta_s_per_sample: float
    eval_s: float = 0.0
    checkpoint_mb: float = 0.0
    save_s: float = 0.0
    load_s: float = 0.0
    start_overhead_s: float = 0.0
    multi_device_efficiency: float = 0.9
    reference_cores: int = 1
    parallel_fraction: float = 1.0
    r2: float = 1.0
    source: Literal["measured", "published", "fitted"] = "fitted"

    def check(self) -> Iterator[tuple[str, str]]:
        for name in ("alpha_s", "beta_s_per_sample", "eval_s", "checkpoint_mb", "save_s", "load_s", "start_overhead_s"):
            if getattr(self, name) < 0:
                yield name, f"must be >= 0, got {getattr(self, name)}"
        if self.alpha_s == 0 and self.beta_s_per_sample == 0:
            yield "beta_s_per_sample", "alpha_s and beta_s_per_sample cannot both be 0"
        if not 0 <= self.multi_device_efficiency <= 1:
            yield "multi_device_efficiency", f"must be in [0, 1], got {self.multi_device_efficiency}"
        if not 0 <= self.parallel_fraction <= 1:
            yield "parallel_fraction", f"must be in [0, 1], got {self.parallel_fraction}"
        if self.reference_cores < 1:
            yield "reference_cores", f"must be >= 1, got {self.reference_cores}"

    def step_time_s(self, batch: int, devices: int, kind: str) -> float:
        """Seconds for one training step.

        Args:
            batch: samples per step (global batch).
            devices: GPUs (kind "gpu") or cores (kind "cpu") of the worker.
            kind: "gpu" or "cpu".
        """
        base = self.alpha_s + self.beta_s_per_sample * batch
        if kind == "cpu":
            p = self.parallel_fraction
            return base * ((1.0 - p) + p * self.reference_cores / devices)
        return base / (1.0 + (devices - 1) * self.multi_device_efficiency)


@dataclass(frozen=True)
class Sample:
    """One raw timing kept for provenance and plots.

    Args:
        model: model name.
        device: device type.
        batch: batch size, samples.
        step_time_s: mean seconds per step.
        ok: false when the cell failed.
        reason: why it failed.
        repeat: repeat index.
        spread: relative spread of the timed steps (max - min) / mean.
        heldout: measured to check the fit, not used in it.
    """

    model: str
    device: str
    batch: int
    step_time_s: float = 0.0
    ok: bool = True
    reason: str = ""
    repeat: int = 0
    spread: float = 0.0
    heldout: bool = False


@dataclass(frozen=True)
class CalibrationConfig:
    """A calibration file: [provenance], [models.<model>.<device>], [[samples]], and optionally
    [curves.<model>]: learning-curve parameters fitted from real runs (``hetune calibrate curves``),
    which take precedence over the experiment's [surrogate] for that model."""

    provenance: dict[str, Any]
    models: dict[str, dict[str, DeviceModel]]
    samples: tuple[Sample, ...] = ()
    curves: dict[str, SurrogateParams] = field(default_factory=dict)

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.models:
            yield "models", "must hold at least one model"

    def step_time_fn(self, model: str, batch_size: int, kind_of: Callable[[str], str],
                     where: str = "calibration") -> Callable[[str, int], float]:
        """Seconds per iteration of ``model`` at ``batch_size`` for (device type, devices): what strategies carve by.

        Args:
            model: a key of [models].
            batch_size: samples per iteration.
            kind_of: device type -> "gpu" or "cpu" (``ClusterConfig.device_kind``).
            where: the calibration file, for messages.
        """
        def step_time_s(device: str, devices: int) -> float:
            return self.device_model(model, device, where).step_time_s(batch_size, devices, kind_of(device))

        return step_time_s

    def device_model(self, model: str, device: str, where: str = "calibration") -> DeviceModel:
        """Look up one model on one device type or raise ConfigError naming the missing key."""
        per_model = self.models.get(model)
        if per_model is None:
            raise ConfigError(where, f"models.{model}", f"no calibration for model {model!r} (have: {', '.join(sorted(self.models))})")
        dm = per_model.get(device)
        if dm is None:
            raise ConfigError(where, f"models.{model}.{device}", f"no calibration for device type {device!r} (have: {', '.join(sorted(per_model))})")
        return dm


def load_calibration(path: str | Path) -> CalibrationConfig:
    """Load and validate a calibration TOML file.

    Args:
        path: the calibration file.
    """
    return from_mapping(CalibrationConfig, read_toml(path), str(path))
