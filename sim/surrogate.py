"""Learning-curve surrogate: accuracy as a function of hyperparameter history and iterations.

A trial carries one number of state, its *effective progress* ``p`` (in
iterations of ideal training). Each chunk of ``k`` iterations at learning
rate ``lr`` and momentum ``m`` adds ``k * q`` to ``p``, where ``q`` in (0, 1]
is the quality of the hyperparameters:

    lr_eff = lr / (1 - m)                       # SGD heavy-ball effective step
    q      = exp(-0.5 * (log10(lr_eff / lr_opt) / width) ** 2)
    q      = 0  if lr_eff > diverge_lr           # training diverges: no progress

The accuracy the trial reports after the chunk is

    acc(p) = chance + (max_accuracy - chance) * (1 - exp(-(p / tau) ** shape))
    reported = clip(acc(p) + Normal(0, noise_std), 0, 1)

so bad learning rates are visibly worse (they progress slower), the curve
saturates like real training (``shape`` 1: fastest at the start; above 1 an
S-curve, slow at first, as small-batch runs on a weak signal learn), and exploit copies a donor's state by copying
its ``p``.

Batch size. ``tau_iterations``, ``lr_opt`` and ``diverge_lr`` are stated at
``ref_batch`` examples per iteration. At another global batch ``B`` the
simulator uses McCandlish et al.'s empirical model of large-batch training
(arXiv:1812.06162, eq. 2.7-2.11): the steps needed fall as
``S_min * (1 + B_noise / B)`` and the best step size grows as
``eps_max / (1 + B_noise / B)``, so with

    s(B) = (1 + noise_batch / ref_batch) / (1 + noise_batch / B)

one iteration at ``B`` makes ``s(B)`` times the progress of one at
``ref_batch`` and the learning-rate optimum and divergence point move by the
same factor (the linear scaling rule of Goyal et al., arXiv:1706.02677, for
``B`` well under ``noise_batch``; no gain per iteration beyond it).
``ref_batch = 0`` states the curve at the experiment's own batch (no
adjustment): what ``hetune calibrate curves`` writes when the recorded runs
used one batch size only.

The shipped experiments cite where their numbers come from in their
``[surrogate]`` comments; ``hetune calibrate curves`` fits them from
recorded runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

import numpy as np


def noise_scale_factor(noise_batch, ref_batch, batch):
    """s(B) = (1 + noise_batch/ref_batch) / (1 + noise_batch/batch): progress per iteration at global
    batch ``batch`` relative to ``ref_batch`` (floats or numpy arrays, examples)."""
    return (1.0 + noise_batch / ref_batch) / (1.0 + noise_batch / batch)


def effective_lr(config: Mapping[str, float]) -> float:
    """lr / (1 - momentum), the SGD heavy-ball step (lr default 0.1, momentum default 0)."""
    return float(config.get("lr", 0.1)) / max(1.0 - float(config.get("momentum", 0.0)), 1e-6)


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
        shape: exponent of the progress in the curve (1: exponential approach; > 1: S-shaped).
        ref_batch: global batch (examples per iteration) at which tau_iterations, lr_opt and
            diverge_lr are stated; 0: the experiment's own batch.
        noise_batch: McCandlish et al.'s gradient noise scale B_noise, in examples: batches well
            under it scale linearly, batches above it gain little per iteration.
    """

    chance_accuracy: float = 0.1
    max_accuracy: float = 0.93
    tau_iterations: float = 430.0
    lr_opt: float = 1.0
    width_decades: float = 0.6
    diverge_lr: float = 50.0
    noise_std: float = 0.01
    shape: float = 1.0
    ref_batch: float = 0.0
    noise_batch: float = 1000.0

    def batch_factor(self, batch: float) -> float:
        """s(B): progress per iteration at global batch ``batch`` relative to ``ref_batch``."""
        if self.ref_batch <= 0 or batch <= 0:
            return 1.0
        return noise_scale_factor(self.noise_batch, self.ref_batch, batch)

    def at_batch(self, batch: float) -> "SurrogateParams":
        """These parameters restated at global batch ``batch`` (ref_batch becomes 0: no further change)."""
        if self.ref_batch <= 0:
            return self
        s = self.batch_factor(batch)
        return replace(self, tau_iterations=self.tau_iterations / s, lr_opt=self.lr_opt * s,
                       diverge_lr=self.diverge_lr * s, ref_batch=0.0)

    def check(self) -> Iterator[tuple[str, str]]:
        if not 0 <= self.chance_accuracy < self.max_accuracy <= 1:
            yield "max_accuracy", "need 0 <= chance_accuracy < max_accuracy <= 1"
        for name in ("tau_iterations", "lr_opt", "width_decades", "diverge_lr", "shape"):
            if getattr(self, name) <= 0:
                yield name, f"must be > 0, got {getattr(self, name)}"
        if not 0 <= self.noise_std <= 0.5:  # no evaluation swings by more than half the accuracy range
            yield "noise_std", f"must be in [0, 0.5] (accuracy units), got {self.noise_std}"
        if self.ref_batch != 0 and not self.ref_batch >= 1:
            yield "ref_batch", f"must be 0 (the experiment's batch) or a batch of at least 1, got {self.ref_batch}"
        if self.noise_batch <= 0:
            yield "noise_batch", f"must be > 0, got {self.noise_batch}"


def quality(params: SurrogateParams, config: Mapping[str, float]) -> float:
    """Hyperparameter quality q in [0, 1] (1 = ideal progress per iteration).

    Args:
        params: surrogate parameters.
        config: hyperparameters; ``lr`` (default 0.1) and ``momentum`` (default 0) are used.
    """
    lr_eff = effective_lr(config)
    if lr_eff > params.diverge_lr or lr_eff <= 0:
        return 0.0
    ratio = lr_eff / params.lr_opt
    if not 0 < ratio < math.inf:  # an optimum restated past float range (huge lr_opt x batch factor)
        return 0.0
    z = math.log10(ratio) / params.width_decades
    return math.exp(-0.5 * z * z)


def expected_accuracy(params: SurrogateParams, progress: float) -> float:
    """Noise-free accuracy after ``progress`` effective iterations."""
    gap = params.max_accuracy - params.chance_accuracy
    x = progress / params.tau_iterations
    if x <= 0:
        return params.chance_accuracy
    z = params.shape * math.log(x)  # (p / tau) ** shape as exp(z): no overflow at any shape
    return params.chance_accuracy + gap * (1.0 if z > 50 else 1.0 - math.exp(-math.exp(z)))


def advance(params: SurrogateParams, progress: float, config: Mapping[str, float], iterations: int) -> float:
    """Effective progress after training ``iterations`` more iterations with ``config``."""
    return progress + iterations * quality(params, config)


def observe(params: SurrogateParams, progress: float, rng: np.random.Generator) -> float:
    """Reported (noisy) accuracy at ``progress``, drawn from the trial's own stream."""
    acc = expected_accuracy(params, progress)
    if params.noise_std > 0:
        acc += float(rng.normal(0.0, params.noise_std))
    return min(1.0, max(0.0, acc))


from hetune.sim.learning import LearningModel, register  # noqa: E402  (the registry imports this module lazily)


@register
class BellModel(LearningModel):
    """The bell curve above as a learning model (``[learning] kind = "bell"``): the state is the
    effective progress p, and every reading draws the evaluation noise ``noise_std``. Its
    parameters are ``[surrogate]`` (or the calibration's fitted ``[curves.<model>]``), restated at
    the experiment's batch. No schedule beats the best constant configuration in it."""

    name = "bell"
    summary = "accuracy from effective progress; the lr only sets the speed (no schedule helps)"
    Params = SurrogateParams

    @classmethod
    def params_from(cls, learning: Any, bell: SurrogateParams, where: str) -> SurrogateParams:
        return bell

    def initial_state(self, rng: np.random.Generator) -> float:
        return 0.0

    def advance(self, state: float, config: Mapping[str, float], iterations: int) -> float:
        return advance(self.params, state, config, iterations)

    def accuracy(self, state: float) -> float:
        return expected_accuracy(self.params, state)

    def observe(self, state: float, rng: np.random.Generator) -> float:
        return observe(self.params, state, rng)
