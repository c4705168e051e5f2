"""Where a population's accuracies and PBT decisions come from; the engine does not know which.

``SurrogatePopulation`` samples initial configs, trains each trial's state in the experiment's
learning model (sim/learning.py), draws its readings and lets PBT's ranking decide exploits.
``sim.replay.ReplayPopulation`` replays a recorded run instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from hetune.sim import pbt as pbt_math
from hetune.sim.config import PBTConfig
from hetune.sim.learning import LearningModel, advance, call, checked


@dataclass(frozen=True)
class Clone:
    """An exploit decision: what the trial copies.

    Args:
        donor: donor trial id.
        donor_iteration: iteration of the copied checkpoint.
        progress: the copied model state (the learning model's; unused by replays).
        new_config: configuration after explore.
        operations: explore operation per key.
    """

    donor: int
    donor_iteration: int
    progress: Any
    new_config: dict[str, float]
    operations: dict[str, str]


class PopulationModel(Protocol):
    """Accuracy and PBT-decision source of a simulation."""

    def population(self, default: int) -> int: ...

    def initial_config(self, trial_id: int, rng: np.random.Generator) -> dict[str, float]: ...

    def initial_state(self, trial: Any) -> Any:
        """The model state of ``trial`` before it trains (again, after a restart from scratch)."""

    def chunk(self, trial: Any, iterations: int, evaluate: bool) -> None:
        """After ``trial`` trained ``iterations`` more (trial.iteration already advanced): set
        trial.progress and, when the trainable evaluates at this iteration (``evaluate``), trial.accuracy."""

    def clone(self, trial: Any, bottom: bool, pick_donor: Callable[[], Any],
              explore: Callable[[dict[str, float]], tuple[dict[str, float], dict[str, str]]]) -> Clone | None:
        """At a perturbation point: the exploit to apply to ``trial``, or None."""


class SurrogatePopulation:
    """A learning model's population with Ray Tune's PBT decisions.

    Args:
        model: the learning model (sim/learning.py).
        pbt: PBT settings (mutations for initial sampling).
    """

    def __init__(self, model: LearningModel, pbt: PBTConfig) -> None:
        self.model = model
        self.pbt = pbt

    def population(self, default: int) -> int:
        return default

    def initial_config(self, trial_id: int, rng: np.random.Generator) -> dict[str, float]:
        return pbt_math.sample_config(self.pbt.mutations, rng, self.pbt.initial_config)

    def initial_state(self, trial: Any) -> Any:
        return call(self.model, "initial_state", trial.id, trial.iteration, self.model.initial_state, trial.rng)

    def chunk(self, trial: Any, iterations: int, evaluate: bool) -> None:
        m = self.model
        trial.progress = call(m, "advance", trial.id, trial.iteration, advance, m, trial.progress, trial.config,
                              iterations, trial.rng)
        if evaluate:
            trial.accuracy = checked(m, call(m, "observe", trial.id, trial.iteration, m.observe, trial.progress,
                                             trial.rng), trial.id, trial.iteration)

    def clone(self, trial: Any, bottom: bool, pick_donor: Callable[[], Any],
              explore: Callable[[dict[str, float]], tuple[dict[str, float], dict[str, str]]]) -> Clone | None:
        if not bottom:
            return None
        donor = pick_donor()
        if donor is None or donor.pbt_ckpt is None:
            return None  # Ray Tune: the donor kept no checkpoint at its last perturbation point, skip
        ckpt = donor.pbt_ckpt
        new, ops = explore(ckpt.config)
        return Clone(donor.id, ckpt.iteration, ckpt.progress, new, ops)
