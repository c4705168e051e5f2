"""The simulator's adaptation hook backed by a learned policy (``hetune simulate --adapt-policy DIR``).

When a strategy moves a trial to a faster worker, the simulator treats it as an
"up" for that trial's job: the policy plays its 3 decisions greedily with the
trial's fraction of iterations left as its time left, on the policy's own base
model (the one its tables were built with), and the deepened model's step time
is taken as base step time x (deepened parameters / base parameters).

Approximate: the policy was trained on small CNN tables, not on the
experiment's model; parameters stand in for compute; and only the cost of
deepening is modelled: the learning-curve surrogate has no notion of model
capacity, so the accuracy benefit of a deeper model is not simulated. All three
decisions see the same time left: the epochs between them (about an epoch each in
the tables) are not modelled.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from hetune.adapt.net2net import SMALL_MODELS, count_parameters, deepen
from hetune.adapt.policy import load_policy, state_features
from hetune.sim.hooks import MoveEffect


class PolicyHook:
    """A move hook (sim.hooks.MoveHook) backed by a policy folder: a move to a faster worker is an "up".

    Args:
        policy_dir: folder written by ``hetune adapt learn``.
        model: base model of the policy (default: the first table's model column, else convnet2).
    """

    def __init__(self, policy_dir: Path, model: str = "") -> None:
        self.policy, self.sha256 = load_policy(policy_dir)
        self.model = model or self._model_of(policy_dir)
        self._cache: dict[int, tuple[list[int], float]] = {}

    @staticmethod
    def _model_of(policy_dir: Path) -> str:
        from hetune.adapt.tables import read_table
        meta = json.loads((policy_dir / "policy.json").read_text())
        try:
            return read_table(meta["tables"][0]).model
        except Exception:  # the tables may have moved: fall back to the scenarios' model
            return "convnet2"

    def on_move(self, trial: int, from_step_s: float, to_step_s: float, time_left_fraction: float) -> MoveEffect | None:
        """On a move to a faster worker, the policy's deepening and its step-time factor (logged as "adapt")."""
        if to_step_s >= from_step_s:
            return None
        actions, factor = self.on_up(trial, time_left_fraction)
        return MoveEffect(factor, "adapt", {"actions": list(actions)})

    @torch.no_grad()
    def on_up(self, trial: int, time_left_fraction: float) -> tuple[list[int], float]:
        """Deepening actions the policy plays greedily with this time left, and the parameter ratio they cost."""
        key = round(time_left_fraction * 20)  # 5% buckets: the same situation gets the same answer
        if key not in self._cache:
            model = SMALL_MODELS[self.model]()
            base = count_parameters(model)
            actions: list[int] = []
            for step in range(3):
                x = torch.tensor([state_features(model, time_left_fraction, 1.0, step, actions)])
                a = int(self.policy(x).argmax(1)[0])
                deepen(model, a)
                actions.append(a)
            self._cache[key] = (actions, count_parameters(model) / base)
        return self._cache[key]
