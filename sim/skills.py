"""``skills``: a learning model that real runs can fit, noisy labels and late learning included.

Why another model. The noisy quadratic model (sim/nqm.py) maps one loss to accuracy, so lower training
loss always means higher accuracy; the real digits runs (results/digits/) memorise their noisy labels
(test accuracy peaks and falls while training loss keeps falling), a low lr leads early and a high lr
climbs late and keeps what it learned after a drop. This model says those things directly, as three
skills a trial accumulates and one noise floor, added in logit space (Li, Wei, Ma 2019, arXiv:1907.04595:
a large lr learns patterns a small one memorises past; Liu et al. 2020, early-learning regularisation)::

    accuracy = chance + (max_accuracy - chance) * sigmoid(z)
    z = start_logit + (1 - phi) * (easy_weight (1 - e^-E) + hard_weight (1 - e^-H)) - memo_weight (1 - e^-M)
    phi = 1 - exp(-floor_weight tau)                                   (floor = "share", the default)
    z = start_logit + easy_weight (1 - e^-E) + hard_weight (1 - e^-H) - memo_weight (1 - e^-M)
        - floor_weight tau                                              (floor = "logit", the first form)

- **easy skill** ``E``: grows at ``easy_rate (eta / 0.1) ** easy_lr_power`` per iteration (a power near 0:
  every lr learns it; below 0: a low lr is faster, as when a high lr's noise hides the early patterns);
- **hard skill** ``H``: grows at ``hard_rate (tau / 0.1) ** hard_lr_power`` per iteration: with a large
  power only a high lr makes it, and a drop keeps it (it is learned, not a floor); with
  ``hard_after_easy`` (the third form) it grows at that rate times ``1 - e^-E``: the hard patterns are
  learned on top of the easy ones, so a high lr that slows the easy skill slows the hard one too, and
  an early drop finds little of either learned (little to give back) while a late one finds much;
- **memorisation** ``M``: grows at ``memo_rate exp(-tau / memo_temperature) (1 - e^-E)`` per iteration:
  once the easy patterns are fitted, a low lr fits the noisy labels and test accuracy falls;
- **noise floor**: the current temperature hides a share ``phi`` of what the skills have learned, given
  back at once by a drop, so a late drop (much learned) jumps and an early one gains little at once
  (``floor = "share"``); the first form subtracted ``floor_weight tau`` from the logit whatever had been
  learned (``"logit"``: results/skills-digits/ shows why it was replaced, and keeps its scores);
- **divergence**: ``eta > diverge_eta`` (times ``1 + warmup_gain`` once ``warmup_iterations`` have been
  trained: what a warm-up buys; no fitted run has one, so it is held at a stated prior) leaves the
  network at chance for good.

How hyperparameters act (assumptions, stated): the effective step is ``eta = lr / (1 - momentum)``
(heavy-ball momentum at steady state); the SGD noise temperature is ``tau = eta * batch_ref / batch``
(Smith and Le 2018; batch_ref 0 = the experiment's batch). The digits runs are all at momentum 0.9 and
batch 8, so they cannot tell ``eta`` from ``tau``, nor test either assumption.

A chunk at a fixed configuration is closed form (E and H grow linearly, M by the integral of
``1 - e^-E`` over the chunk). Readings add three noises (``observe``): an autocorrelated deviation
``dev`` held in the state (AR(1) in iterations: correlation ``ar_corr_50`` over 50 iterations, stationary
sd ``ar_std``), which an exploit copies with the checkpoint and whose innovations come from the
advancing trial's own random stream (``advance`` gets it); a shared term ``shared_std * N(0, 1)``
that is a function of the run's seed and the iteration only, so every trial of a run shares it (the
real trainable seeds every trial's data order with the run's seed); and the binomial noise of
``eval_samples`` test images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np

from hetune.sim.learning import LearningModel, register

ETA_REF = 0.1  # the effective lr (and temperature) at which rates are stated


@dataclass(frozen=True)
class SkillsParams:
    """Parameters of the skills model (rates per iteration at the experiment's batch; logits unitless).

    Args:
        chance_accuracy: accuracy of an untrained network (1 / classes).
        max_accuracy: accuracy as the logit goes to infinity.
        start_logit: the logit z of an untrained network (with the floor of its first chunk's tau).
        easy_weight, easy_rate, easy_lr_power: the easy skill's logit gain, its rate at eta = 0.1, and
            the power of eta / 0.1 that scales the rate.
        hard_weight, hard_rate, hard_lr_power: the same for the hard skill, scaled by tau / 0.1.
        memo_weight, memo_rate, memo_temperature: memorisation's logit loss, its rate at tau = 0 (per
            iteration, times the easy skill), and the temperature that slows it e-fold.
        floor_weight: how fast the hidden share grows with temperature ("share": phi = 1 - exp(-floor_weight
            tau)), or logit lost per unit of temperature ("logit").
        floor: "share" or "logit" (the module docstring).
        hard_after_easy: the hard skill grows only as fast as the easy one is learned (the third form).
        diverge_eta: effective lr above which the network diverges (inf: never).
        warmup_iterations, warmup_gain: after this many iterations the divergence threshold is
            ``diverge_eta * (1 + warmup_gain)`` (prior: 0, no effect).
        ar_std: stationary sd of a trial's autocorrelated reading deviation, accuracy units.
        ar_corr_50: its correlation over 50 iterations, in [0, 1).
        shared_std: sd of the term every trial of a run shares at one iteration, accuracy units.
        batch_ref: the batch at which temperatures are stated (0 = the experiment's).
    """

    chance_accuracy: float = 0.1
    max_accuracy: float = 0.95
    start_logit: float = -3.0
    easy_weight: float = 4.0
    easy_rate: float = 0.01
    easy_lr_power: float = 0.0
    hard_weight: float = 1.0
    hard_rate: float = 0.002
    hard_lr_power: float = 2.0
    memo_weight: float = 1.0
    memo_rate: float = 0.001
    memo_temperature: float = 0.1
    floor_weight: float = 3.0
    floor: str = "share"
    hard_after_easy: bool = False
    diverge_eta: float = math.inf
    warmup_iterations: int = 0
    warmup_gain: float = 0.0
    ar_std: float = 0.0
    ar_corr_50: float = 0.5
    shared_std: float = 0.0
    batch_ref: int = 0

    def check(self) -> Iterator[tuple[str, str]]:
        if not 0 <= self.chance_accuracy < self.max_accuracy <= 1:
            yield "max_accuracy", (f"must be above chance_accuracy ({self.chance_accuracy}) and at most 1, "
                                   f"got {self.max_accuracy}")
        for name in ("start_logit", "easy_weight", "easy_lr_power", "hard_weight", "hard_lr_power", "memo_weight",
                     "floor_weight"):
            v = getattr(self, name)
            if not math.isfinite(v) or abs(v) > 1e3:
                yield name, f"must be a finite number of magnitude at most 1000, got {v}"
        for name in ("easy_rate", "hard_rate", "memo_rate", "warmup_gain"):
            v = getattr(self, name)
            if not 0 <= v < 1e6:
                yield name, f"must be >= 0 and finite, got {v}"
        if not self.memo_temperature > 0:
            yield "memo_temperature", f"must be > 0, got {self.memo_temperature}"
        if not self.diverge_eta > 0:
            yield "diverge_eta", f"must be > 0, got {self.diverge_eta}"
        if self.warmup_iterations < 0 or self.batch_ref < 0:
            yield "warmup_iterations" if self.warmup_iterations < 0 else "batch_ref", "must be >= 0"
        for name in ("ar_std", "shared_std"):  # no evaluation swings by more than half the accuracy range
            v = getattr(self, name)
            if not 0 <= v <= 0.5:
                yield name, f"must be in [0, 0.5] (accuracy units), got {v}"
        if self.floor not in ("share", "logit"):
            yield "floor", f'must be "share" or "logit", got {self.floor!r}'
        if self.floor == "share" and self.floor_weight < 0:
            yield "floor_weight", f"must be >= 0 where floor = \"share\", got {self.floor_weight}"
        if not 0 <= self.ar_corr_50 < 1:
            yield "ar_corr_50", f"must be in [0, 1), got {self.ar_corr_50}"


class SkillsState(NamedTuple):
    """A trial's state: its skills E, H, M, the temperature of its last chunk, the iterations it has
    trained, its reading deviation, and whether it diverged."""

    easy: float = 0.0
    hard: float = 0.0
    memo: float = 0.0
    tau: float = 0.0
    iteration: int = 0
    dev: float = 0.0
    diverged: bool = False


@register
class Skills(LearningModel):
    """Easy and high-lr skills, memorisation and a noise floor (see the module docstring)."""

    name = "skills"
    summary = "easy and high-lr skills, memorisation of noisy labels, an lr-proportional floor (logit-additive)"
    Params = SkillsParams
    noisy_advance = True

    def __init__(self, params: SkillsParams, batch_size: int, eval_samples: int) -> None:
        super().__init__(params, batch_size, eval_samples)
        self._batch_factor = (params.batch_ref or batch_size) / max(batch_size, 1)
        self._rho = params.ar_corr_50 ** (1.0 / 50.0)
        self._shared: dict[int, float] = {}
        self.run_seed = 0

    def for_run(self, seed: int) -> "Skills":
        """This model for a run of seed ``seed``: its shared reading term, and, where ``uncertainty`` is
        set, parameters drawn from it (by the seed, or by ``draw``: every strategy at one seed, or every
        seed of one sweep world, gets the same draw)."""
        params = self.params
        if self.uncertainty:
            params = draw_params(self.params, self.uncertainty, seed if self.draw < 0 else self.draw)
        m = Skills(params, self.batch_size, self.eval_samples)
        m.run_seed = seed
        return m

    def initial_state(self, rng: np.random.Generator) -> SkillsState:
        dev = float(rng.normal(0.0, self.params.ar_std)) if self.params.ar_std > 0 else 0.0
        return SkillsState(dev=dev)

    def rates(self, config: Mapping[str, float]) -> tuple[float, float, float, float, float]:
        """(eta, tau, easy rate, hard rate, memorisation rate) per iteration at ``config``."""
        p = self.params
        lr, m = float(config.get("lr", 0.1)), float(config.get("momentum", 0.0))
        eta = lr / max(1.0 - m, 1e-12)
        tau = eta * self._batch_factor
        easy = p.easy_rate * (eta / ETA_REF) ** p.easy_lr_power if eta > 0 else 0.0
        hard = p.hard_rate * (tau / ETA_REF) ** p.hard_lr_power if tau > 0 else 0.0
        memo = p.memo_rate * math.exp(-tau / p.memo_temperature)
        return eta, tau, easy, hard, memo

    def advance(self, state: SkillsState, config: Mapping[str, float], iterations: int,
                rng: np.random.Generator | None = None) -> SkillsState:
        if iterations <= 0:
            return state
        p = self.params
        k = int(iterations)
        dev = state.dev
        if p.ar_std > 0 and rng is not None:
            keep = self._rho ** k
            dev = keep * dev + math.sqrt(max(0.0, 1.0 - keep * keep)) * p.ar_std * float(rng.normal())
        if state.diverged:
            return state._replace(iteration=state.iteration + k, dev=dev)
        eta, tau, r_e, r_h, r_m = self.rates(config)
        limit = p.diverge_eta * (1.0 + p.warmup_gain if state.iteration >= p.warmup_iterations > 0 else 1.0)
        if not eta <= limit:  # NaN fails too
            return SkillsState(0.0, 0.0, 0.0, tau, state.iteration + k, dev, True)
        # the integral of 1 - exp(-(E + r_e s)) over s in [0, k]: memorisation (and, with hard_after_easy,
        # the hard skill) follows the easy skill
        left = math.exp(-state.easy)
        grown = k - left * (-math.expm1(-r_e * k)) / r_e if r_e > 0 else k * (1.0 - left)
        hard = state.hard + r_h * (grown if p.hard_after_easy else k)
        return SkillsState(state.easy + r_e * k, hard, state.memo + r_m * grown, tau,
                           state.iteration + k, dev)

    def logit(self, state: SkillsState) -> float:
        """z of ``state`` (see the module docstring); -inf for a diverged network."""
        p = self.params
        if state.diverged:
            return -math.inf
        learned = p.easy_weight * -math.expm1(-state.easy) + p.hard_weight * -math.expm1(-state.hard)
        memo = p.memo_weight * -math.expm1(-state.memo)
        if p.floor == "logit":
            return p.start_logit + learned - memo - p.floor_weight * state.tau
        return p.start_logit + math.exp(-p.floor_weight * state.tau) * learned - memo

    def accuracy(self, state: SkillsState) -> float:
        p = self.params
        z = self.logit(state)
        frac = 0.0 if z < -700 else 1.0 / (1.0 + math.exp(-z))
        return p.chance_accuracy + (p.max_accuracy - p.chance_accuracy) * frac

    def shared(self, iteration: int) -> float:
        """The run's shared reading term at ``iteration`` (a function of the run's seed and the iteration)."""
        if self.params.shared_std <= 0:
            return 0.0
        v = self._shared.get(iteration)
        if v is None:
            v = self.params.shared_std * float(np.random.default_rng([self.run_seed, iteration, 0x5EED]).normal())
            self._shared[iteration] = v
        return v

    def observe(self, state: SkillsState, rng: np.random.Generator) -> float:
        a = self.accuracy(state)
        if not state.diverged:
            a += state.dev + self.shared(state.iteration)
        a = min(1.0, max(0.0, a))
        reading = float(rng.binomial(self.eval_samples, a)) / self.eval_samples if self.eval_samples > 0 else a
        return min(1.0, max(0.0, reading))


def draw_params(params: SkillsParams, uncertainty: Mapping[str, Any], key: int, tries: int = 100) -> SkillsParams:
    """``params`` with the uncertain ones drawn jointly from ``uncertainty`` (a normal of the transformed
    values: log where its transforms say so), by a stream of ``key`` alone. A draw that breaks a
    parameter's rule (``SkillsParams.check``) is drawn again; after ``tries`` the fitted values stand."""
    rng = np.random.default_rng([int(key), 0xD4A3])
    names, kinds = uncertainty["names"], uncertainty["transforms"]
    mean, cov = np.asarray(uncertainty["mean"], float), np.asarray(uncertainty["cov"], float)
    for _ in range(tries):
        x = rng.multivariate_normal(mean, cov, method="eigh")
        values: dict[str, Any] = {n: float(math.exp(min(v, 700.0)) if k == "log" else v)
                                  for n, k, v in zip(names, kinds, x)}
        drawn = replace(params, **values)
        if not any(True for _ in drawn.check()):
            return drawn
    return params


def uncertainty_problems(u: dict[str, Any]) -> Iterator[str]:
    """What is wrong with a ``[learning.uncertainty]`` table (nothing where it is well formed)."""
    names, transforms, mean, cov = u.get("names"), u.get("transforms"), u.get("mean"), u.get("cov")
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        yield "names must be a list of parameter names"
        return
    n = len(names)
    if not (isinstance(transforms, list) and len(transforms) == n and all(t in ("lin", "log") for t in transforms)):
        yield f"transforms must list \"lin\" or \"log\" for each of the {n} names"
    if not (isinstance(mean, list) and len(mean) == n and all(_finite(v) for v in mean)):
        yield f"mean must hold {n} finite numbers"
    if not (isinstance(cov, list) and len(cov) == n
            and all(isinstance(r, list) and len(r) == n and all(_finite(v) for v in r) for r in cov)):
        yield f"cov must be a {n} x {n} table of finite numbers"
    elif any(cov[i][i] < 0 for i in range(n)):
        yield "cov has a negative variance on its diagonal"
    extra = sorted(set(u) - {"names", "transforms", "mean", "cov"})
    if extra:
        yield f"unknown key(s) {', '.join(extra)}"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
