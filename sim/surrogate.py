"""Learning-curve surrogate: accuracy as a function of hyperparameter history and iterations.

A trial carries one number of state, its *effective progress* ``p`` (in
iterations of ideal training). Each chunk of ``k`` iterations at learning
rate ``lr`` and momentum ``m`` adds ``k * q`` to ``p``, where ``q`` in (0, 1]
is the quality of the hyperparameters:

    lr_eff = lr / (1 - m)                       # SGD heavy-ball effective step
    q      = exp(-0.5 * (log10(lr_eff / lr_opt) / width) ** 2)
    q      = 0  if lr_eff > diverge_lr           # training diverges: no progress

The accuracy the trial reports after the chunk is

    acc(p) = chance + (max_accuracy - chance) * (1 - exp(-p / tau))
    reported = clip(acc(p) + Normal(0, noise_std), 0, 1)

so bad learning rates are visibly worse (they progress slower), the curve
saturates like real training, and exploit copies a donor's state by copying
its ``p``. Defaults are for ResNet-18 on CIFAR-10 at batch 512 with SGD: a
tuned run (lr 0.1, momentum 0.9, lr_eff 1.0) reaches about 85% at 1000
iterations (about 10 epochs), in line with the HRFS setup where STOP_ACC = 0.8
is reachable within STOP_ITER = 1000; lr_eff ten times off costs about 75% of
progress (width 0.6 decades). They are a documented guess until fitted from
real runs (``hetune calibrate curves``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np


@dataclass(frozen=True)
class SurrogateParams:
    """Parameters of the learning-curve surrogate.

    Args:
        chance_accuracy: accuracy of an untrained model (1 / classes).
        max_accuracy: asymptotic accuracy of ideal training.
        tau_iterations: effective iterations to close 63% of the gap to max_accuracy.
        lr_opt: best effective learning rate lr / (1 - momentum).
        width_decades: standard deviation of the quality bell, in decades of lr_eff.
        diverge_lr: effective learning rate above which training makes no progress.
        noise_std: standard deviation of evaluation noise, in accuracy units.
    """

    chance_accuracy: float = 0.1
    max_accuracy: float = 0.93
    tau_iterations: float = 430.0
    lr_opt: float = 1.0
    width_decades: float = 0.6
    diverge_lr: float = 50.0
    noise_std: float = 0.01

    def check(self) -> Iterator[tuple[str, str]]:
        if not 0 <= self.chance_accuracy < self.max_accuracy <= 1:
            yield "max_accuracy", "need 0 <= chance_accuracy < max_accuracy <= 1"
        for name in ("tau_iterations", "lr_opt", "width_decades", "diverge_lr"):
            if getattr(self, name) <= 0:
                yield name, f"must be > 0, got {getattr(self, name)}"
        if self.noise_std < 0:
            yield "noise_std", f"must be >= 0, got {self.noise_std}"


def quality(params: SurrogateParams, config: Mapping[str, float]) -> float:
    """Hyperparameter quality q in [0, 1] (1 = ideal progress per iteration).

    Args:
        params: surrogate parameters.
        config: hyperparameters; ``lr`` (default 0.1) and ``momentum`` (default 0) are used.
    """
    lr = float(config.get("lr", 0.1))
    momentum = float(config.get("momentum", 0.0))
    lr_eff = lr / max(1.0 - momentum, 1e-6)
    if lr_eff > params.diverge_lr or lr_eff <= 0:
        return 0.0
    z = math.log10(lr_eff / params.lr_opt) / params.width_decades
    return math.exp(-0.5 * z * z)


def expected_accuracy(params: SurrogateParams, progress: float) -> float:
    """Noise-free accuracy after ``progress`` effective iterations."""
    gap = params.max_accuracy - params.chance_accuracy
    return params.chance_accuracy + gap * (1.0 - math.exp(-progress / params.tau_iterations))


def advance(params: SurrogateParams, progress: float, config: Mapping[str, float], iterations: int) -> float:
    """Effective progress after training ``iterations`` more iterations with ``config``."""
    return progress + iterations * quality(params, config)


def observe(params: SurrogateParams, progress: float, rng: np.random.Generator) -> float:
    """Reported (noisy) accuracy at ``progress``, drawn from the trial's own stream."""
    acc = expected_accuracy(params, progress)
    if params.noise_std > 0:
        acc += float(rng.normal(0.0, params.noise_std))
    return min(1.0, max(0.0, acc))
