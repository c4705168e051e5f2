"""Step-time models read from a calibration file.

A model is a pure function of (model, device type, batch size, device count), at a fixed
global batch (strong scaling: the batch is split over the devices of a worker).

GPU types, ``n`` GPUs of one data-parallel worker on one node::

    step_time_s(B, n) = alpha_s + beta_s_per_sample * B / n + allreduce_s(n)
    allreduce_s(n)    = 2 (n - 1) / n * gradient_mb * 8 / 1000 / link_gbps     (ring all-reduce)

The first two terms are the no-communication bound: each GPU still pays the fixed per-step
cost and does 1/n of the per-sample work. ``link_gbps`` is the node's GPU interconnect from
the cluster file. Where a strong-scaling speedup was measured (``speedup`` at ``speedup_batch``),
its communication cost replaces the ring estimate; it is never below zero, so no calibration
beats the bound, and a measured speedup above ``n`` is refused when the file is loaded.

CPU types, ``n`` cores: Amdahl's law around the core count alpha and beta were measured with::

    step_time_s(B, n) = (alpha_s + beta_s_per_sample * B) * ((1 - p) + p * reference_cores / n)

which never speeds up more than linearly in ``n`` for ``p`` in [0, 1]. ``p`` is
``parallel_fraction_batch``'s entry at the batch where that batch's threads were timed (how well
threads share a step depends on its size: on the 2-core build host two threads gained 1.5x at batch
4 and 1.2x at batch 8), else the median ``parallel_fraction``.

Every row records the network it was measured on (``stem``: ResNet with the CIFAR 3x3 stem, or
torchvision's ImageNet stem): the two differ some 15x in work per 32x32 image, so a row of one
is never used for the other (``check_network``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

from hetune.sim.enums import DeviceKind
from hetune.sim.errors import ConfigError
from hetune.sim.schema import from_mapping
from hetune.sim.storage import StorageModel
from hetune.sim.surrogate import SurrogateParams
from hetune.sim.tomlfile import read_toml

if TYPE_CHECKING:
    from hetune.sim.cluster import ClusterConfig

STEMS = ("cifar", "imagenet")


@dataclass(frozen=True)
class DeviceModel:
    """Measured or fitted costs of one model on one device type.

    Args:
        alpha_s: fixed seconds per training step.
        beta_s_per_sample: seconds per sample per step.
        stem: the network measured: "cifar" (3x3 stem, no max pool) or "imagenet" (torchvision as is).
        eval_s: seconds for one evaluation pass on the test set.
        checkpoint_mb: checkpoint size, in MB (weights + optimizer state).
        save_s: seconds to save a checkpoint.
        load_s: seconds to load a checkpoint.
        start_overhead_s: seconds to start a trial (Tune's set-up, actor and process start, data, model build).
        resume_s: seconds to restart a paused or exploited trial, restore excluded (actor teardown and
            start, data, model build); 0 = not measured, ``start_overhead_s`` is charged instead.
        gradient_mb: MB of gradients all-reduced per data-parallel step (4 bytes per parameter).
        speedup: GPU types: measured strong-scaling speedup at ``speedup_batch`` by GPU count ("2", "4", ...).
        speedup_batch: the global batch the speedup was measured at, samples.
        reference_cores: CPU types: the core count alpha and beta were measured with.
        parallel_fraction: CPU types: Amdahl parallel fraction in [0, 1] (median over the batch sizes
            timed; evaluation and batch sizes not timed use it).
        parallel_fraction_batch: CPU types: the fraction per batch size where threads were timed
            (keys: batch sizes as strings); a training step at a batch listed here uses it.
        r2: goodness of the alpha/beta fit (1 = perfect), when fitted.
        source: "measured", "published" or "fitted".
        step_cv: relative standard deviation of a chunk's seconds (training and evaluation) from
            chunk to chunk, pooled over batch sizes (the spread of repeated timings, ``hetune
            calibrate --repeat``, or of recorded runs' chunks, ``hetune calibrate spread``; 0 = none
            measured, every chunk takes its expected time). The simulator draws each chunk's factor
            from a log-normal of mean 1 with this spread (sim/timing_noise.py).
        step_cv_batch: the same spread per batch size where it was measured (keys: batch sizes as
            strings); a run at a batch size listed here uses it instead of ``step_cv``.
        overhead_cv: relative standard deviation of a trial start, restart, restore and save, seconds
            (recorded runs' saves and restores, ``hetune calibrate spread``; 0 = none measured).
        drift_cv: relative standard deviation of this device type's speed from run to run, as
            repeated calibrations of one host measure it (``hetune calibrate spread --drift``); each
            simulated run draws one factor per device type on its compute (0 = none measured).
    """

    alpha_s: float
    beta_s_per_sample: float
    stem: Literal["cifar", "imagenet"]
    eval_s: float = 0.0
    checkpoint_mb: float = 0.0
    save_s: float = 0.0
    load_s: float = 0.0
    start_overhead_s: float = 0.0
    resume_s: float = 0.0
    gradient_mb: float = 0.0
    speedup: dict[str, float] = field(default_factory=dict)
    speedup_batch: int = 0
    reference_cores: int = 1
    parallel_fraction: float = 1.0
    parallel_fraction_batch: dict[str, float] = field(default_factory=dict)
    r2: float = 1.0
    source: Literal["measured", "published", "fitted"] = "fitted"
    step_cv: float = 0.0
    step_cv_batch: dict[str, float] = field(default_factory=dict)
    overhead_cv: float = 0.0
    drift_cv: float = 0.0

    def check(self) -> Iterator[tuple[str, str]]:
        spreads = {"step_cv": self.step_cv, "overhead_cv": self.overhead_cv, "drift_cv": self.drift_cv,
                   **{f"step_cv_batch.{k}": v for k, v in sorted(self.step_cv_batch.items())}}
        for name, cv in spreads.items():
            top = 5 if name == "overhead_cv" else 1  # overheads are skewed: a rare slow restart doubles the spread
            if not 0 <= cv < top:
                yield name, f"must be in [0, {top}) (a relative spread), got {cv}"
        for key in sorted(self.step_cv_batch):
            if not (key.isdigit() and int(key) >= 1):
                yield f"step_cv_batch.{key}", "keys are batch sizes >= 1"
        for name in ("alpha_s", "beta_s_per_sample", "eval_s", "checkpoint_mb", "save_s", "load_s",
                     "start_overhead_s", "resume_s", "gradient_mb"):
            if getattr(self, name) < 0:
                yield name, f"must be >= 0, got {getattr(self, name)}"
        if self.alpha_s == 0 and self.beta_s_per_sample == 0:
            yield "beta_s_per_sample", "alpha_s and beta_s_per_sample cannot both be 0"
        fractions = {"parallel_fraction": self.parallel_fraction,
                     **{f"parallel_fraction_batch.{k}": v for k, v in sorted(self.parallel_fraction_batch.items())}}
        for name, p in fractions.items():
            if not 0 <= p <= 1:
                yield name, f"must be in [0, 1], got {p}"
        for key in sorted(self.parallel_fraction_batch):
            if not (key.isdigit() and int(key) >= 1):
                yield f"parallel_fraction_batch.{key}", "keys are batch sizes >= 1"
        if self.reference_cores < 1:
            yield "reference_cores", f"must be >= 1, got {self.reference_cores}"
        if self.speedup and self.speedup_batch < 1:
            yield "speedup_batch", f"must be >= 1 where a speedup is given, got {self.speedup_batch}"
        for key, value in sorted(self.speedup.items()):
            n = int(key) if key.isdigit() else 0
            if n < 2:
                yield f"speedup.{key}", "keys are GPU counts >= 2"
            elif not 0 < value <= n:  # a fixed global batch cannot get more than n times faster on n GPUs
                yield f"speedup.{key}", (f"{value} on {n} GPUs is more than linear (efficiency {value / n:.2f} > 1)"
                                         if value > n else f"must be > 0, got {value}")

    def step_time_s(self, batch: int, devices: int, kind: DeviceKind, link_gbps: float = 0.0) -> float:
        """Seconds for one training step at a fixed global batch.

        Args:
            batch: samples per step (global batch, split over the devices).
            devices: GPUs (kind GPU) or cores (kind CPU) of the worker.
            kind: the device type's kind ("gpu" or "cpu" also do).
            link_gbps: the node's GPU interconnect, Gb/s (0 = no communication term).
        """
        if kind == DeviceKind.CPU:
            return (self.alpha_s + self.beta_s_per_sample * batch) * self.cpu_factor(devices, batch)
        return self.alpha_s + self.beta_s_per_sample * batch / devices + self.allreduce_s(devices, link_gbps)

    def eval_time_s(self, devices: int, kind: DeviceKind) -> float:
        """Seconds of one evaluation of the full test set on a worker of ``devices`` GPUs or cores.

        ``eval_s`` is measured on one device (GPU types) or ``reference_cores`` cores (CPU types);
        evaluation is forward passes over fixed batches, so it scales with the worker as a training
        step's compute does (the calibrated parallel fraction of a CPU type, the batch split over a
        multi-GPU worker's devices), with no gradient exchange.
        """
        if kind == DeviceKind.CPU:
            return self.eval_s * self.cpu_factor(devices)
        return self.eval_s / max(devices, 1)

    def cpu_factor(self, cores: int, batch: int = 0) -> float:
        """Amdahl's law: a CPU type's time on ``cores`` cores over its time on ``reference_cores``,
        with the fraction timed at ``batch`` samples where there is one (0: the median fraction)."""
        p = self.parallel_fraction_batch.get(str(batch), self.parallel_fraction)
        return (1.0 - p) + p * self.reference_cores / cores

    @property
    def restart_s(self) -> float:
        """Seconds a trial's restart costs before its restore: the measured resume, else the start."""
        return self.resume_s or self.start_overhead_s

    def allreduce_s(self, devices: int, link_gbps: float) -> float:
        """Seconds of communication per step on ``devices`` GPUs (0 for one), never negative."""
        if devices <= 1:
            return 0.0
        ring = 2.0 * (devices - 1) / devices
        measured = {int(k): v for k, v in self.speedup.items()}
        if measured:
            # c * ring(n) fitted to the largest measured count: t1 / s = alpha + beta B / n + c ring(n)
            n = max(measured)
            b = self.speedup_batch
            t_n = (self.alpha_s + self.beta_s_per_sample * b) / measured[n]
            c = (t_n - self.alpha_s - self.beta_s_per_sample * b / n) / (2.0 * (n - 1) / n)
            return max(0.0, c) * ring
        if link_gbps <= 0:
            return 0.0
        return ring * self.gradient_mb * 8.0 / 1000.0 / link_gbps


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
    which take precedence over the experiment's [surrogate] for that model.

    Args:
        provenance: where the numbers come from (host, versions, how each was measured); free-form.
        models: per model, per device type, its step-time model and overheads.
        samples: the measured step times the models were fitted to (one row per model, device, batch).
        curves: per model, learning-curve parameters fitted from real runs (the bell model's).
        storage: the checkpoint storage's measured costs (sim/storage.py); None: the older model
            (a node-to-node copy where a trial resumes away from its checkpoint, no upload).
    """

    provenance: dict[str, Any]
    models: dict[str, dict[str, DeviceModel]]
    samples: tuple[Sample, ...] = ()
    curves: dict[str, SurrogateParams] = field(default_factory=dict)
    storage: StorageModel | None = None

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.models:
            yield "models", "must hold at least one model"
        for model, rows in sorted(self.models.items()):
            stems = sorted({dm.stem for dm in rows.values()})
            if len(stems) > 1:  # one model name, two networks: its device types would not compare
                device = next(d for d, dm in sorted(rows.items()) if dm.stem != rows[min(rows)].stem)
                yield f"models.{model}.{device}.stem", (f"mixes network variants for {model} ({', '.join(stems)}); "
                                                        "calibrate every device type on one network")

    def check_network(self, model: str, stem: str, where: str, asked_by: str) -> None:
        """Refuse rows of ``model`` measured on another network than ``stem``.

        Args:
            model: a key of [models].
            stem: the network the experiment trains (experiment.stem).
            where: the calibration file, for messages.
            asked_by: the experiment file, for messages.
        """
        for device, dm in sorted(self.models.get(model, {}).items()):
            if dm.stem != stem:
                raise ConfigError(where, f"models.{model}.{device}.stem",
                                  f"measured on the {dm.stem}-stem {model}, but {asked_by} trains the {stem}-stem one "
                                  f"(experiment.stem); calibrate that network (hetune calibrate --stem {stem})")

    def step_time_fn(self, model: str, batch_size: int, cluster: "ClusterConfig",
                     where: str = "calibration") -> Callable[[str, int], float]:
        """Seconds per iteration of ``model`` at ``batch_size`` for (device type, devices): what strategies carve by.

        Args:
            model: a key of [models].
            batch_size: samples per iteration (global batch).
            cluster: gives each device type's kind and interconnect.
            where: the calibration file, for messages.
        """
        def step_time_s(device: str, devices: int) -> float:
            kind, link_gbps = cluster.device_kind(device), cluster.devices[device].link_gbps
            return self.device_model(model, device, where).step_time_s(batch_size, devices, kind, link_gbps)

        return step_time_s

    def device_model(self, model: str, device: str, where: str = "calibration") -> DeviceModel:
        """Look up one model on one device type or raise ConfigError naming the missing key."""
        per_model = self.models.get(model)
        if per_model is None:
            raise ConfigError(where, f"models.{model}",
                              f"no calibration for model {model!r} (have: {', '.join(sorted(self.models))})")
        dm = per_model.get(device)
        if dm is None:
            raise ConfigError(where, f"models.{model}.{device}",
                              f"no calibration for device type {device!r} (have: {', '.join(sorted(per_model))})")
        return dm


def load_calibration(path: str | Path) -> CalibrationConfig:
    """Load and validate a calibration TOML file.

    Args:
        path: the calibration file.
    """
    return from_mapping(CalibrationConfig, read_toml(path), str(path))
