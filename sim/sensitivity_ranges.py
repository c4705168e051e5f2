"""How far ``hetune sweep --sensitivity`` perturbs the model: the experiment's ``[sensitivity]`` table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class SensitivityRanges:
    """How far ``hetune sweep --sensitivity`` perturbs the model: each perturbed world draws one
    factor per range, log-uniform in [low, high], and multiplies what the range names by it.

    Args:
        step_time: a device type's alpha and beta (drawn per device type; measured step times
            spread some 10-20% between runs and hosts).
        scaling: the parallel part of multi-device workers (the node's link bandwidth, measured
            speedups above 1 and CPU parallel fractions); at most 1, never better than calibrated.
        overheads: a device type's start, resume, save, restore and evaluation seconds (per type).
        lr_opt: the surrogate's best effective learning rate.
        width_decades: the surrogate's lr tolerance.
        tau_iterations: the surrogate's learning speed.
        noise_std: the surrogate's evaluation noise.
        noise_batch: the surrogate's gradient noise scale (how much a bigger batch gains per
            iteration; cited to an order of magnitude only).
        nqm_noise: the noisy quadratic model's gradient noise (its noise floor, and where larger
            batches stop helping); noise_std scales its reading noise too.
        nqm_curvature_min: its flattest curvature (how many iterations training needs).
        nqm_curvature_max: its steepest curvature (the lr at which training diverges).
        nqm_loss_half: its loss-to-accuracy map (the loss at which accuracy is half way).
        seed: seed of the worlds drawn.
    """

    step_time: tuple[float, ...] = (0.8, 1.25)
    scaling: tuple[float, ...] = (0.6, 1.0)
    overheads: tuple[float, ...] = (0.5, 2.0)
    lr_opt: tuple[float, ...] = (0.5, 2.0)
    width_decades: tuple[float, ...] = (0.67, 1.5)
    tau_iterations: tuple[float, ...] = (0.8, 1.25)
    noise_std: tuple[float, ...] = (0.5, 2.0)
    noise_batch: tuple[float, ...] = (0.25, 4.0)
    nqm_noise: tuple[float, ...] = (0.5, 2.0)
    nqm_curvature_min: tuple[float, ...] = (0.5, 2.0)
    nqm_curvature_max: tuple[float, ...] = (0.8, 1.25)
    nqm_loss_half: tuple[float, ...] = (0.67, 1.5)
    seed: int = 0

    RANGES = ("step_time", "scaling", "overheads", "lr_opt", "width_decades", "tau_iterations", "noise_std",
              "noise_batch", "nqm_noise", "nqm_curvature_min", "nqm_curvature_max", "nqm_loss_half")

    def check(self) -> Iterator[tuple[str, str]]:
        for name in self.RANGES:
            r = getattr(self, name)
            if len(r) != 2:
                yield name, f"must be [low, high], got {list(r)}"
            elif r[0] <= 0 or r[1] <= 0:
                yield name, f"factors must be > 0, got {list(r)}"
            elif r[0] > r[1]:
                yield name, f"low must be <= high, got {list(r)}"
        if len(self.scaling) == 2 and self.scaling[1] > 1:
            yield "scaling", f"high must be <= 1 (scaling never beats the calibration), got {self.scaling[1]}"
        if self.seed < 0:
            yield "seed", f"must be >= 0, got {self.seed}"
