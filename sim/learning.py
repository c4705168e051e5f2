"""Learning models are pluggable, like strategies: what a trial's accuracy does as it trains.

A learning model answers four questions about one trial's model state (an opaque, immutable value
that a checkpoint holds and an exploit copies):

- ``initial_state(rng)``: the state of a freshly initialized network;
- ``advance(state, config, iterations)``: the state after ``iterations`` more iterations of SGD at
  the hyperparameters ``config`` (``lr``, ``momentum``, ...), at the experiment's global batch;
- ``accuracy(state)``: the expected test accuracy of that state, noise-free, in [0, 1];
- ``observe(state, rng)``: one evaluation's reading, with the evaluation noise, from the trial's
  own random stream.

A model whose state carries noise of its own (an autocorrelated deviation) sets ``noisy_advance``:
``advance`` then gets the advancing trial's own random generator as a fourth argument, so a seed
gives the same run every time, an exploit copies the donor's state and the receiving trial draws
its future noise from its own stream. ``for_run(seed)`` gives a model its run's seed, for noise that
every trial of a run shares (the default keeps one model for every run).

Models register by name (``@register``) and are chosen by ``[learning] kind`` in the experiment
(default ``"nqm"``, sim/nqm.py; ``"bell"`` is the older curve of sim/surrogate.py). A model's
parameters are a frozen dataclass (``Params``), read from ``[learning.<kind>]`` and checked like
every config table. The classes are pure Python and NumPy, so that a Ray Tune trainable can run one
in place of a network. A model that raises, or returns an accuracy that is not a finite number in
[0, 1], stops the run with one line naming the model, the trial and the iteration (exit status 1).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np

from hetune.sim.errors import ConfigError, RunFailed
from hetune.sim.registry import add
from hetune.sim.schema import from_mapping

__all__ = ["LearningModel", "LearningModelFailed", "REGISTRY", "advance", "create", "names", "register"]


class LearningModel:
    """Base class of a learning model; subclass it, set ``name``, ``summary`` and ``Params``.

    Args:
        params: an instance of ``Params`` (validated).
        batch_size: the experiment's global batch, examples per iteration.
        eval_samples: test images per evaluation (the binomial noise of a reading).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type | None] = None
    noisy_advance: ClassVar[bool] = False  # advance(state, config, iterations, rng): see the module docstring

    def __init__(self, params: Any, batch_size: int, eval_samples: int) -> None:
        self.params = params
        self.batch_size = batch_size
        self.eval_samples = eval_samples
        self.uncertainty: dict[str, Any] = {}  # [learning.uncertainty] where draws are on (sim/config.py)
        self.draw = -1  # the draw every run takes; -1: its seed's

    @classmethod
    def params_from(cls, learning: Any, bell: Any, where: str) -> Any:
        """This model's parameters from the experiment: by default ``[learning.params]`` checked against
        ``Params`` (the built-in models take theirs from ``[learning.nqm]`` or the bell curve).

        Args:
            learning: the ``[learning]`` table (sim/config.py LearningConfig).
            bell: the bell curve's parameters (calibration curves or ``[surrogate]``) at the batch.
            where: the experiment file, for messages.
        """
        return from_mapping(cls.Params, learning.params, where, "learning.params") if cls.Params else None

    def initial_state(self, rng: np.random.Generator) -> Any:
        """The state of a trial that has not trained yet."""
        raise NotImplementedError

    def advance(self, state: Any, config: Mapping[str, float], iterations: int) -> Any:
        """The state after ``iterations`` more iterations at ``config`` (a new value: never mutate ``state``)."""
        raise NotImplementedError

    def accuracy(self, state: Any) -> float:
        """Expected test accuracy of ``state``, noise-free."""
        raise NotImplementedError

    def observe(self, state: Any, rng: np.random.Generator) -> float:
        """One evaluation's reading of ``state``; default: the expected accuracy, no noise."""
        return self.accuracy(state)

    def for_run(self, seed: int) -> "LearningModel":
        """This model for one run of seed ``seed`` (default: itself; a model with noise shared by a run's
        trials returns a copy that knows the seed)."""
        return self


def advance(model: LearningModel, state: Any, config: Mapping[str, float], iterations: int,
            rng: np.random.Generator) -> Any:
    """``model.advance``, with the trial's own generator where the model takes one (``noisy_advance``)."""
    if model.noisy_advance:
        return model.advance(state, config, iterations, rng)  # type: ignore[call-arg]
    return model.advance(state, config, iterations)


class LearningModelFailed(RunFailed):
    """A learning model raised or returned a non-finite accuracy: one line, exit status 1."""


REGISTRY: dict[str, type[LearningModel]] = {}


def register(cls: type[LearningModel]) -> type[LearningModel]:
    """Class decorator adding a learning model to the registry under ``cls.name``."""
    return add(REGISTRY, cls, "learning model")


def names() -> list[str]:
    """Registered learning model names, sorted."""
    _load_builtin()
    return sorted(REGISTRY)


def get_class(name: str, where: str, key: str = "learning.kind") -> type[LearningModel]:
    """The registered class ``name`` or ConfigError listing the known ones."""
    _load_builtin()
    if name not in REGISTRY:
        from hetune.sim import plugins  # an installed package's entry point, looked up only when needed

        plugins.from_entry_points("learning model", name)
    if name not in REGISTRY:
        raise ConfigError(where, key, f"unknown learning model {name!r} (known: {', '.join(names())})")
    return REGISTRY[name]


def _load_builtin() -> None:
    from hetune.sim import nqm, skills, surrogate  # noqa: F401  (importing registers them)


def create(learning: Any, bell: Any, batch_size: int, eval_samples: int, where: str = "") -> LearningModel:
    """The experiment's learning model.

    Args:
        learning: the ``[learning]`` table (sim/config.py LearningConfig).
        bell: the bell curve's parameters (calibration curves or ``[surrogate]``) at the batch.
        batch_size: global batch, examples per iteration.
        eval_samples: test images per evaluation.
        where: the experiment file, for messages about ``[learning.params]``.
    """
    cls = get_class(learning.kind, where)
    model = cls(cls.params_from(learning, bell, where), batch_size, eval_samples)
    model.uncertainty = learning.uncertainty if learning.draws else {}
    model.draw = learning.draw
    return model


def checked(model: LearningModel, value: Any, trial: int, iteration: int) -> float:
    """``value`` as an accuracy in [0, 1], or LearningModelFailed naming the model, trial and iteration."""
    try:
        acc = float(value)
    except (TypeError, ValueError):
        acc = math.nan
    if not 0.0 <= acc <= 1.0:  # NaN fails this too
        raise LearningModelFailed(f"learning model {model.name!r} returned accuracy {value!r} for trial {trial} at "
                                  f"iteration {iteration}: not a number in [0, 1]")
    return acc


def call(model: LearningModel, what: str, trial: int, iteration: int, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, with anything it raises turned into one line naming the model, trial and iteration."""
    try:
        return fn(*args)
    except LearningModelFailed:
        raise
    except Exception as exc:  # a user's model: whatever it raises is reported, not a traceback
        raise LearningModelFailed(f"learning model {model.name!r} failed in {what} for trial {trial} at iteration "
                                  f"{iteration}: {type(exc).__name__}: {exc}") from None

