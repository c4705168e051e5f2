"""The noisy quadratic model (NQM): a learning model in which learning-rate schedules, exploit and
batch size matter, for the reasons they matter in real training.

Zhang et al., "Which Algorithmic Choices Matter at Which Batch Sizes? Insights From a Noisy
Quadratic Model", NeurIPS 2019 (arXiv:1907.04164), model a network's loss near the end of training
as a quadratic in ``d`` eigen-directions of the Hessian with curvatures ``h_i`` and a stochastic
gradient ``g = H theta + eps`` whose noise covariance is proportional to the curvature and falls
with the batch: ``Cov(eps) = noise * H / B``. They show it predicts how the steps needed fall with
batch size up to a critical batch, and what momentum and learning-rate schedules buy, as measured
on real networks (their sec. 4). Here each trial is one such model trained by PyTorch's SGD with
momentum (``b <- m b + g``, ``theta <- theta - lr b``, the buffer a checkpoint restores), so along
direction ``i``, with ``s = (theta, b)``::

    s' = A s + w eps,    A = [[1 - lr h, -lr m], [h, m]],    w = (-lr, 1),    Var(eps) = noise h / B

The trial's state is the expected second moments ``u = (E theta^2, E theta b, E b^2)`` per
direction, which follow an exact affine recursion ``u' = T(lr, m, h) u + n(lr, h, B)`` (the
notebook of gd-zhang/noisy-quadratic-model iterates the same second moments). A chunk of ``k``
iterations at fixed hyperparameters is one matrix power of the 4x4 augmented recursion per
direction (cached per lr, momentum and k, so a trial pays for it once until its configuration
changes). A matrix power, unlike the eigendecomposition of the closed form (eq. 21), stays exact at
critical damping. What follows from the model rather than being patched on:

- **Schedules.** A constant lr leaves a noise floor in the steep directions (about
  ``lr noise / (2 B)`` of loss per direction) while a small lr crawls along the flat ones: large
  then small beats every constant lr, which is what PBT's exploit-and-explore can find.
- **Divergence.** ``lr h_max > 2 (1 + m)`` makes the recursion unstable; the moments grow without
  bound and the accuracy falls to chance, for good (a diverged network does not recover).
- **Batch size** acts only through the gradient noise ``noise / B``: larger batches lower the floor
  and allow larger steps, gaining per iteration up to a critical batch and little beyond it.
- **Exploit** copies the donor checkpoint's moments (and its luck, below); explore changes the
  hyperparameters from the next chunk on.

Accuracy. Every direction starts with the same share of the loss (``E theta_0^2 = 1 / h_i``), so
progress along the spectrum shows as a loss that falls steadily over log-time, as real curves do.
The relative excess loss ``r = L / L_0`` maps to accuracy by a monotone logistic in log-loss::

    accuracy(r) = chance + (max_accuracy - chance) / (1 + (r / loss_half) ** slope)

A reading adds the binomial noise of ``eval_samples`` test images and a reading-to-reading term
``noise_std`` (drawn from the trial's own stream).

Luck. The expected moments are deterministic, but two seeds of one configuration do not end at the
same accuracy: each trial draws a persistent accuracy offset ``Normal(0, seed_std)`` when it is
initialized (its initialization and data order), kept with its weights: an exploit hands the donor's
offset over with its checkpoint, and a trial restarted from scratch draws a new one.

Parameters are stated at the experiment's batch, in units where ``lr`` is the learning rate the
trial's config holds; the shipped values and their sources are in the experiment files' comments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np

from hetune.sim.learning import LearningModel, register

_CAP = 1e150  # transitions and dead moments are capped here, so products stay finite (no NaN, no warnings)
_DIVERGED = 1e6  # relative loss past which a network has diverged (float16/32 training would hold NaN)
_CACHE_SIZE = 4096  # (lr, momentum, iterations) transitions kept per model


@dataclass(frozen=True)
class NQMParams:
    """Parameters of the noisy quadratic model.

    Args:
        dims: curvature directions d (at least 1).
        curvature_max: the largest curvature h_1, per unit of lr: SGD with momentum m diverges above
            lr = 2 (1 + m) / curvature_max.
        curvature_min: the smallest curvature h_d; the d curvatures are spaced evenly in log between.
            1 / (lr / (1 - m) * curvature_min) is about how many iterations the flattest direction needs.
        noise: gradient noise at batch 1 relative to the curvature: Var(eps_i) = noise * h_i / B, in
            examples (the batch at which the noise equals ... a gradient of unit size).
        chance_accuracy: accuracy of an untrained network (1 / classes).
        max_accuracy: accuracy at zero excess loss.
        loss_half: relative excess loss (of the initial loss) at which accuracy is halfway from
            chance to max_accuracy.
        slope: steepness of accuracy in log-loss.
        noise_std: reading-to-reading noise of an evaluation beyond the binomial, accuracy units.
        seed_std: spread of a trial's persistent accuracy offset (its seed), accuracy units.
    """

    dims: int = 24
    curvature_max: float = 2.5
    curvature_min: float = 0.0007
    noise: float = 40.0
    chance_accuracy: float = 0.1
    max_accuracy: float = 0.95
    loss_half: float = 0.2
    slope: float = 1.0
    noise_std: float = 0.005
    seed_std: float = 0.002

    def check(self) -> Iterator[tuple[str, str]]:
        if self.dims < 1:
            yield "dims", f"must be >= 1 (an empty spectrum trains nothing), got {self.dims}"
        if self.dims > 10_000:
            yield "dims", f"must be <= 10000 (each direction costs time in every chunk), got {self.dims}"
        for name in ("curvature_max", "curvature_min", "loss_half", "slope"):
            if not getattr(self, name) > 0:
                yield name, f"must be > 0, got {getattr(self, name)}"
        if self.curvature_min > self.curvature_max:
            yield "curvature_min", f"must be <= curvature_max ({self.curvature_max}), got {self.curvature_min}"
        for name in ("noise", "noise_std", "seed_std"):
            if getattr(self, name) < 0:
                yield name, f"must be >= 0, got {getattr(self, name)}"
        # no evaluation swings by more than half the accuracy range; gradient noise past 1e12 overflows
        for name, most in (("noise_std", 0.5), ("seed_std", 0.5), ("noise", 1e12)):
            if getattr(self, name) > most:
                yield name, f"must be at most {most:g}, got {getattr(self, name):g}"
        if not 0 <= self.chance_accuracy < self.max_accuracy <= 1:
            yield "max_accuracy", (f"must be above chance_accuracy ({self.chance_accuracy}) and at most 1, "
                                   f"got {self.max_accuracy}")

    def curvatures(self) -> np.ndarray:
        """h_1 >= ... >= h_d, evenly spaced in log (per unit of lr)."""
        if self.dims == 1:
            return np.array([self.curvature_max])
        return np.geomspace(self.curvature_max, self.curvature_min, self.dims)


class NQMState(NamedTuple):
    """A trial's model state: second moments (3, d) (E theta^2, E theta b, E b^2; read-only), its
    persistent accuracy offset, its excess loss relative to the initial loss (kept, as every reading
    needs it), and whether it diverged (then it stays so: a network whose weights became NaN does
    not train back, though the quadratic would)."""

    moments: np.ndarray
    luck: float
    loss: float = 1.0
    diverged: bool = False


@register
class NQM(LearningModel):
    """The noisy quadratic model with PyTorch's momentum (see the module docstring)."""

    name = "nqm"
    summary = "noisy quadratic model (Zhang et al. 2019): schedules, divergence and batch size from one model"
    Params = NQMParams

    def __init__(self, params: NQMParams, batch_size: int, eval_samples: int) -> None:
        super().__init__(params, batch_size, eval_samples)
        self.h = params.curvatures()
        self.sigma2 = params.noise * self.h / max(batch_size, 1)
        start = np.zeros((3, params.dims))
        start[0] = 1.0 / self.h
        start.flags.writeable = False
        self._start = start
        self._h_per_dim = self.h / params.dims  # relative loss = h . E theta^2 / d (each direction starts at 1/d)
        dead = np.full((3, params.dims), _CAP)
        dead.flags.writeable = False
        self._dead = dead
        self._cache: dict[tuple[float, float, int], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def params_from(cls, learning: Any, bell: Any, where: str) -> NQMParams:
        return learning.nqm

    def initial_state(self, rng: np.random.Generator) -> NQMState:
        luck = float(rng.normal(0.0, self.params.seed_std)) if self.params.seed_std > 0 else 0.0
        return NQMState(self._start, luck)

    def _transition(self, lr: float, m: float, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(T^k (d, 3, 3), sum_j T^j n (d, 3)): k iterations of the moment recursion."""
        key = (lr, m, k)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        h, d = self.h, self.params.dims
        g = np.zeros((d, 4, 4))
        # an lr or momentum far out of range overflows here: capped below, and a diverged network results
        with np.errstate(over="ignore", invalid="ignore"):
            a11, a12, a21, a22 = 1.0 - lr * h, np.full(d, -lr * m), h, np.full(d, m)
            g[:, 0, 0], g[:, 0, 1], g[:, 0, 2] = a11 * a11, 2 * a11 * a12, a12 * a12
            g[:, 1, 0], g[:, 1, 1], g[:, 1, 2] = a11 * a21, a11 * a22 + a12 * a21, a12 * a22
            g[:, 2, 0], g[:, 2, 1], g[:, 2, 2] = a21 * a21, 2 * a21 * a22, a22 * a22
            g[:, 0, 3], g[:, 1, 3], g[:, 2, 3] = lr * lr * self.sigma2, -lr * self.sigma2, self.sigma2
            g[:, 3, 3] = 1.0
            # nan_to_num is the identity on finite arrays: the check is cheaper than the copy it makes
            p = np.linalg.matrix_power(g if np.isfinite(g).all() else np.nan_to_num(g, nan=_CAP, posinf=_CAP,
                                                                                     neginf=-_CAP), k)
        if not np.isfinite(p).all():
            p = np.nan_to_num(p, nan=_CAP, posinf=_CAP, neginf=-_CAP)
        out = (np.ascontiguousarray(p[:, :3, :3]), np.ascontiguousarray(p[:, :3, 3]))
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = out
        return out

    def advance(self, state: NQMState, config: Mapping[str, float], iterations: int) -> NQMState:
        if iterations <= 0 or state.diverged:
            return state
        lr, m = float(config.get("lr", 0.1)), float(config.get("momentum", 0.0))
        t, c = self._transition(lr, m, int(iterations))
        # No overflow here: transitions are capped at _CAP and live moments stay below _DIVERGED / h_min.
        u = np.einsum("dij,jd->id", t, state.moments) + c.T
        loss = float(np.dot(self._h_per_dim, u[0]))
        if not loss <= _DIVERGED:  # NaN and inf fail this too
            return NQMState(self._dead, state.luck, _CAP, True)
        u.flags.writeable = False
        return NQMState(u, state.luck, loss)

    def relative_loss(self, state: NQMState) -> float:
        """Excess loss over the initial loss (1 at initialization; past 1e6 the network has diverged)."""
        return state.loss

    def accuracy(self, state: NQMState) -> float:
        p = self.params
        r = self.relative_loss(state)
        z = p.slope * (math.log(max(r, 1e-300)) - math.log(p.loss_half))
        frac = 0.0 if z > 700 else 1.0 / (1.0 + math.exp(z))
        return p.chance_accuracy + (p.max_accuracy - p.chance_accuracy) * frac

    def observe(self, state: NQMState, rng: np.random.Generator) -> float:
        a = min(1.0, max(0.0, self.accuracy(state) + state.luck))
        reading = float(rng.binomial(self.eval_samples, a)) / self.eval_samples if self.eval_samples > 0 else a
        if self.params.noise_std > 0:
            reading += float(rng.normal(0.0, self.params.noise_std))
        return min(1.0, max(0.0, reading))


def schedule_accuracy(model: NQM, segments: list[tuple[float, float, int]]) -> float:
    """Expected accuracy after training from scratch through ``segments`` of (lr, momentum,
    iterations), no luck: what the schedule checks and the shipped parameters' comments use."""
    state: Any = NQMState(model._start, 0.0)
    for lr, m, k in segments:
        state = model.advance(state, {"lr": lr, "momentum": m}, k)
    return model.accuracy(state)
