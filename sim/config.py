"""Experiment configuration: what is tuned, on which cluster, with which PBT settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

from hetune.sim.faults import FaultsConfig
from hetune.sim.learning import names as learning_names
from hetune.sim.nqm import NQMParams
from hetune.sim.plugins import PluginsConfig
from hetune.sim.sensitivity_ranges import SensitivityRanges
from hetune.sim.surrogate import SurrogateParams


@dataclass(frozen=True)
class Mutation:
    """How PBT samples and explores one hyperparameter.

    Args:
        kind: "uniform" or "loguniform" over [low, high], or "choice" among ``values``.
        low: lower bound (continuous kinds).
        high: upper bound (continuous kinds).
        values: ordered choices (kind "choice"); explore moves to a neighbour. Integers stay integers.
        clip: keep perturbed values inside [low, high] (HRFS does; Ray Tune does not).
    """

    kind: Literal["uniform", "loguniform", "choice"]
    low: float = 0.0
    high: float = 0.0
    values: tuple[int | float, ...] = ()
    clip: bool = False

    def check(self) -> Iterator[tuple[str, str]]:
        if self.kind == "choice":
            if not self.values:
                yield "values", "a choice mutation needs a non-empty values list"
        else:
            if not self.low < self.high:
                yield "high", f"must be > low ({self.low}), got {self.high}"
            elif not math.isfinite(self.high - self.low):  # numpy cannot sample such a range
                yield "high", f"high - low must be a finite number, got {self.high} - {self.low}"
            if self.kind == "loguniform" and self.low <= 0:
                yield "low", f"must be > 0 for loguniform, got {self.low}"


@dataclass(frozen=True)
class PBTConfig:
    """Population-Based Training settings, named as in Ray Tune.

    Args:
        metric: reported metric PBT ranks by.
        mode: "max" or "min".
        perturbation_interval: iterations between perturbation points.
        burn_in: iterations before the first perturbation may happen.
        quantile_fraction: fraction of trials in the top and bottom quantile, in (0, 0.5].
        resample_probability: probability that explore resamples instead of perturbing.
        perturbation_factors: multipliers explore picks from for continuous values.
        synch: synchronous PBT (all trials reach a perturbation point before any exploit).
        time_attr: what perturbation_interval and burn_in count, as in Ray Tune: "training_iteration"
            (iterations) or "time_total_s" (the trial's accumulated training seconds, Ray's default:
            on a mixed cluster a trial on a slow device perturbs after fewer iterations).
        mutations: per hyperparameter, how it is sampled and explored.
        initial_config: values every trial starts from, in place of a draw (Ray Tune: constants in the
            ``config`` beside ``hyperparam_mutations``; pbt_example.py starts every trial at lr 0.0001);
            explore perturbs them from the first perturbation on.
    """

    mutations: dict[str, Mutation]
    metric: str = "accuracy"
    mode: Literal["max", "min"] = "max"
    perturbation_interval: int = 50
    burn_in: int = 0
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25
    perturbation_factors: tuple[float, ...] = (1.2, 0.8)
    synch: bool = False
    time_attr: Literal["training_iteration", "time_total_s"] = "training_iteration"
    initial_config: dict[str, int | float] = field(default_factory=dict)

    def check(self) -> Iterator[tuple[str, str]]:
        for key in sorted(set(self.initial_config) - set(self.mutations)):
            yield f"initial_config.{key}", f"not a mutated hyperparameter ({', '.join(sorted(self.mutations))})"
        if self.perturbation_interval < 1:
            yield "perturbation_interval", f"must be >= 1, got {self.perturbation_interval}"
        if self.burn_in < 0:
            yield "burn_in", f"must be >= 0, got {self.burn_in}"
        if not 0 < self.quantile_fraction <= 0.5:
            yield "quantile_fraction", f"must be in (0, 0.5], got {self.quantile_fraction}"
        if not 0 <= self.resample_probability <= 1:
            yield "resample_probability", f"must be in [0, 1], got {self.resample_probability}"
        if not self.perturbation_factors or any(f <= 0 for f in self.perturbation_factors):
            yield "perturbation_factors", "must be a non-empty list of positive numbers"
        if not self.mutations:
            yield "mutations", "must name at least one hyperparameter"
        if self.metric != "accuracy":
            yield "metric", f"only 'accuracy' is reported by trials, got {self.metric!r}"
        elif self.mode != "max":  # Ray would take it, and PBT would copy the least accurate trials
            yield "mode", f"accuracy is maximised: must be \"max\", got {self.mode!r}"


@dataclass(frozen=True)
class PathRef:
    """A reference to another config file.

    Args:
        path: relative to the experiment file, or absolute.
    """

    path: str


@dataclass(frozen=True)
class StrategyChoice:
    """Which strategy ``simulate`` uses when --strategy is not given.

    Args:
        name: a registered strategy name.
    """

    name: str = "tune-default"


@dataclass(frozen=True)
class ExperimentInfo:
    """What is trained and when a trial stops.

    Args:
        name: experiment name.
        model: model name, a key of the calibration file's [models].
        dataset: "cifar10", "cifar100" or "digits" (the handwritten digits hetune ships, 40% of the
            training labels noisy, 500 test images; real/digits.py); required unless nothing is read
            (``real.trainable = "model"``: the learning model stands in for the network).
        stem: the network trained, measured and simulated: "cifar" (ResNet with a 3x3 stem and no
            max pool, the usual network for 32x32 images) or "imagenet" (torchvision's 7x7 stem and
            max pool, some 15x less work per image). Calibration rows must be of this network.
        population: number of PBT trials.
        batch_size: samples per iteration (one iteration = one mini-batch).
        stop_iterations: a trial stops after this many iterations.
        target_accuracy: a trial stops once it reaches this accuracy; time to target
            is when the first trial reaches it.
        checkpoint_interval: iterations between checkpoints.
        max_failures: trial restarts allowed after a failure (real runs).
        eval_samples: test images evaluated at every checkpoint interval and at a trial's last
            iteration (the calibration's eval_s is for the 10,000-image CIFAR test set and is scaled to this).
        seed: default seed.
        budget_s: wall-clock budget, seconds (0: none). With a budget (or budget_cost) the run is in
            budget mode: trials train on to stop_iterations whatever their accuracy, and the run
            reports the best accuracy evaluated within the budget and its anytime curve.
        budget_cost: cost budget, dollars (0: none); see budget_s.
        objective: what a sweep ranks strategies by: time_to_target (default; never reaching the
            target ranks last), makespan, cost (each smallest first) or best_accuracy_at_budget
            (largest first; needs a budget).
    """

    name: str
    model: str
    dataset: Literal["cifar10", "cifar100", "digits", ""] = ""
    stem: Literal["cifar", "imagenet"] = "cifar"
    population: int = 20
    batch_size: int = 512
    stop_iterations: int = 1000
    target_accuracy: float = 0.8
    checkpoint_interval: int = 50
    max_failures: int = 3
    eval_samples: int = 10_000
    seed: int = 0
    budget_s: float = 0.0
    budget_cost: float = 0.0
    objective: Literal["time_to_target", "makespan", "cost", "best_accuracy_at_budget"] = "time_to_target"

    def check(self) -> Iterator[tuple[str, str]]:
        if self.budget_s < 0:
            yield "budget_s", f"must be >= 0 (0: no budget), got {self.budget_s}"
        if self.budget_cost < 0:
            yield "budget_cost", f"must be >= 0 (0: no budget), got {self.budget_cost}"
        if self.objective == "best_accuracy_at_budget" and not self.budget_mode:
            yield "objective", "best_accuracy_at_budget needs experiment.budget_s or experiment.budget_cost"
        if self.population < 1:
            yield "population", f"must be >= 1, got {self.population}"
        if self.batch_size < 1:
            yield "batch_size", f"must be >= 1, got {self.batch_size}"
        if self.stop_iterations < 1:
            yield "stop_iterations", f"must be >= 1, got {self.stop_iterations}"
        if not 0 < self.target_accuracy <= 1:
            yield "target_accuracy", f"must be in (0, 1], got {self.target_accuracy}"
        if self.checkpoint_interval < 1:
            yield "checkpoint_interval", f"must be >= 1, got {self.checkpoint_interval}"
        if self.max_failures < 0:
            yield "max_failures", f"must be >= 0, got {self.max_failures}"
        if self.seed < 0:  # numpy's SeedSequence takes non-negative integers
            yield "seed", f"must be >= 0, got {self.seed}"
        if not 1 <= self.eval_samples <= 10_000:  # the CIFAR test set holds 10,000 images
            yield "eval_samples", f"must be in [1, 10000], got {self.eval_samples}"

    @property
    def budget_mode(self) -> bool:
        """Whether trials train on past the target (a wall-clock or cost budget is set)."""
        return self.budget_s > 0 or self.budget_cost > 0

    @property
    def num_classes(self) -> int:
        return 100 if self.dataset == "cifar100" else 10


@dataclass(frozen=True)
class RealConfig:
    """Settings of real runs (hetune validate).

    Args:
        data_dir: folder holding the CIFAR python folders ("" = use --data-dir).
        synthetic: train on a small synthetic CIFAR-format dataset with a learnable signal (for tests
            that need an instant dataset; real data that needs no download: dataset = "digits").
        synthetic_train: training images of the synthetic dataset.
        synthetic_signal: strength of its class signal, in (0, 1] (1 = learned in a few dozen
            iterations; smaller is harder, so that PBT has something to do).
        threads: torch CPU threads per trial.
        storage_path: Ray Tune storage ("" = <out>/tune); must be shared storage on multi-node clusters.
        shared_storage: the user asserts storage_path is visible from every node.
        fail_once_at_step: fault injection for tests: every trial's process dies once at this step (0 = off).
        trainable: what a real trial trains: "network" (the ResNet, real/trainable.py) or "model" (the
            experiment's learning model in place of a network, real/model_trainable.py: PBT for real
            on known dynamics, no torch, no data).
        model_sleep: with trainable "model", each step and evaluation sleeps this multiple of its
            calibrated seconds (0: as fast as Ray allows), so time_total_s means device seconds.
        reuse_actors: Ray Tune's ``reuse_actors``; only false, its 2.60 default, which hetune models.
    """

    data_dir: str = ""
    synthetic: bool = False
    synthetic_train: int = 2000
    synthetic_signal: float = 1.0
    threads: int = 1
    storage_path: str = ""
    shared_storage: bool = False
    fail_once_at_step: int = 0
    trainable: Literal["network", "model"] = "network"
    model_sleep: float = 1.0
    reuse_actors: bool = False

    def check(self) -> Iterator[tuple[str, str]]:
        if self.reuse_actors:
            yield "reuse_actors", ("hetune models Ray Tune 2.60's default, off: a paused or exploited trial restarts "
                                   "its actor, and the simulator charges that restart (docs/ray.md)")
        if self.threads < 1:
            yield "threads", f"must be >= 1, got {self.threads}"
        if not 1 <= self.synthetic_train <= 50_000:  # CIFAR's training set size: written to disk before a run
            yield "synthetic_train", f"must be in [1, 50000], got {self.synthetic_train}"
        if not 0 < self.synthetic_signal <= 1:
            yield "synthetic_signal", f"must be in (0, 1], got {self.synthetic_signal}"
        if not 0 <= self.model_sleep <= 100:
            yield "model_sleep", f"must be in [0, 100] (a factor on calibrated seconds), got {self.model_sleep}"


@dataclass(frozen=True)
class LearningConfig:
    """Which learning model a simulation uses (sim/learning.py), and its parameters.

    Args:
        kind: a registered learning model: "skills" (fitted to real runs, sim/skills.py; the default
            experiment's), "nqm" (the noisy quadratic model, sim/nqm.py; where none is named), "bell" (the
            curve of ``[surrogate]``, or the calibration's fitted curves; sim/surrogate.py), or one you
            registered.
        nqm: parameters of the noisy quadratic model.
        params: parameters of another registered model, checked against its ``Params``.
        path: a learning file (``hetune calibrate curves --kind nqm`` or ``--kind skills`` writes one)
            whose ``[learning.nqm]``, or whose kind, ``[learning.params]`` and ``[learning.uncertainty]``,
            replace these ("" = none); relative to the experiment file.
        uncertainty: a fit's joint uncertainty (skills): ``names``, ``transforms`` ("lin" or "log"),
            ``mean`` and ``cov`` of the transformed parameters; each simulated run draws its parameters
            from it (sim/skills.py), where ``draws`` is on.
        draws: draw the parameters per run from ``uncertainty`` (false: every run uses the fitted values).
        draw: which draw every run uses (a sweep's ``--draws`` sets it per world); -1: the run's seed's.
    """

    kind: str = "nqm"
    nqm: NQMParams = field(default_factory=NQMParams)
    params: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    uncertainty: dict[str, Any] = field(default_factory=dict)
    draws: bool = True
    draw: int = -1

    def check(self) -> Iterator[tuple[str, str]]:
        known = learning_names()
        if self.kind not in known:
            from hetune.sim import plugins  # an installed package's entry point, looked up only when needed

            plugins.from_entry_points("learning model", self.kind)
            known = learning_names()
        if self.kind not in known:
            yield "kind", f"unknown learning model {self.kind!r} (known: {', '.join(known)})"
        elif self.params and self.kind in ("nqm", "bell"):
            yield "params", f"the {self.kind} model's parameters go in [learning.nqm] or [surrogate], not here"
        if self.draw < -1:
            yield "draw", f"must be >= 0, or -1 for the run's seed, got {self.draw}"
        if self.uncertainty:
            if self.kind != "skills":
                yield "uncertainty", f"only the skills model draws its parameters, not {self.kind!r}"
            else:
                from hetune.sim.skills import uncertainty_problems

                yield from (("uncertainty", why) for why in uncertainty_problems(self.uncertainty))


@dataclass(frozen=True)
class ExperimentConfig:
    """An experiment file, validated.

    Args:
        experiment: what is trained.
        cluster: the cluster file.
        calibration: the calibration file.
        pbt: PBT settings.
        learning: the learning model (what a trial's accuracy does as it trains).
        surrogate: parameters of the "bell" learning model.
        strategy: default strategy.
        strategies: per-strategy parameter tables, validated by each strategy.
        real: settings of real runs.
        sensitivity: ranges of ``hetune sweep --sensitivity``.
        faults: how nodes fail in simulated runs (sim/faults.py; none by default).
        plugins: your own modules of strategies and learning models (sim/plugins.py).
    """

    experiment: ExperimentInfo
    cluster: PathRef
    calibration: PathRef
    pbt: PBTConfig
    learning: LearningConfig = field(default_factory=LearningConfig)
    surrogate: SurrogateParams = field(default_factory=SurrogateParams)
    strategy: StrategyChoice = field(default_factory=StrategyChoice)
    strategies: dict[str, dict[str, Any]] = field(default_factory=dict)
    real: RealConfig = field(default_factory=RealConfig)
    sensitivity: SensitivityRanges = field(default_factory=SensitivityRanges)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.experiment.dataset and self.real.trainable != "model":
            yield "experiment.dataset", ('required: the network trains on it ("cifar10", "cifar100" or "digits"; '
                                         'only real.trainable = "model" reads no data)')
        if (self.pbt.time_attr == "training_iteration"
                and self.pbt.perturbation_interval % self.experiment.checkpoint_interval != 0):
            # A perturbation needs a fresh checkpoint to clone, as in Ray Tune.
            yield "pbt.perturbation_interval", (
                f"must be a multiple of experiment.checkpoint_interval ({self.experiment.checkpoint_interval}), "
                f"got {self.pbt.perturbation_interval}")


def quantile_count(n: int, fraction: float) -> int:
    """Trials in each of the top and bottom quantiles, as Ray Tune computes it.

    Args:
        n: number of ranked trials.
        fraction: quantile fraction.
    """
    if n <= 1:
        return 0
    k = int(math.ceil(n * fraction))
    return min(k, n // 2)
