"""The measured cost of an epoch and an evaluation per model structure (``EpochCost``), and clocks
shared between scenarios (``hetune adapt clock``, ``build-table --clock``).

What an epoch and an evaluation cost is measured once per model structure (the fastest of
interleaved timed rounds, times the steps per epoch) before training starts, rather than per
epoch: on a shared host the wall time of each epoch jitters by tens of percent, which would change
how many epochs fit in the budget from one sequence to the next and drown the differences a table
exists to measure.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from hetune.adapt.scenario import Scenario, scenario_data
from hetune.adapt.net2net import deepened, prefixes
from hetune.sim.errors import ConfigError


EVAL_BATCH = 256  # test images per forward pass when evaluating
# the scenario fields an epoch's and an evaluation's measured cost depends on (see EpochCost.conditions)
CLOCK_FIELDS = ("model", "image_size", "batch_size", "epoch_samples", "test_samples")
StructureKey = tuple[tuple[Any, ...], ...]


def structure_key(model: torch.nn.Module) -> StructureKey:
    """A model's structure: its parameters' names and shapes.

    Names place each layer: a layer added to block 0 or to block 1 has the same shapes.
    """
    return tuple((name, *p.shape) for name, p in model.named_parameters())


class EpochCost:
    """Measured cost of one training epoch and one evaluation, per model structure, in measured seconds.

    ``prime`` times every structure a table can reach in interleaved rounds (one
    training step and one evaluation of each structure per round) and keeps each
    structure's fastest round: a burst of load on a shared host then slows one round
    of every structure rather than all the measurements of one, and the minimum
    discards it. An epoch costs steps per epoch x the fastest training step; an
    evaluation, the fastest pass over one evaluation batch x (test images / batch).
    A structure met later without priming is timed on its own the same way.

    Args:
        scenario: the scenario (batch size, samples per epoch and per evaluation).
        rounds: timed rounds per structure.
    """

    def __init__(self, scenario: Scenario, rounds: int = 10) -> None:
        self.s = scenario
        self.rounds = rounds
        self._cache: dict[StructureKey, tuple[float, float]] = {}

    def __call__(self, model: torch.nn.Module, xtr: torch.Tensor, xte: torch.Tensor) -> tuple[float, float]:
        """(epoch seconds, evaluation seconds) of ``model``."""
        key = structure_key(model)
        if key not in self._cache:
            self.prime([model], xtr, xte)
        return self._cache[key]

    def prime(self, models: list[torch.nn.Module], xtr: torch.Tensor, xte: torch.Tensor) -> None:
        """Time every structure among ``models`` not yet timed, in interleaved rounds."""
        probes: dict[StructureKey, tuple[torch.nn.Module, torch.optim.Optimizer]] = {}
        for m in models:
            key = structure_key(m)
            if key not in self._cache and key not in probes:
                probe = copy.deepcopy(m)  # timing steps must not change a model being trained
                probes[key] = (probe, torch.optim.Adam(probe.parameters(), lr=0.0))
        x = xtr[: self.s.batch_size]
        y = torch.zeros(len(x), dtype=torch.long)
        xev = xte[:EVAL_BATCH]
        ev_scale = len(xte) / max(1, len(xev))
        best = {k: [math.inf, math.inf] for k in probes}
        for r in range(self.rounds + 1):  # round 0 warms up allocators and is discarded
            for key, (probe, opt) in probes.items():
                probe.train()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(probe(x), y).backward()
                opt.step()
                t1 = time.perf_counter()
                probe.eval()
                with torch.no_grad():
                    probe(xev)
                t2 = time.perf_counter()
                if r:
                    best[key] = [min(best[key][0], t1 - t0), min(best[key][1], t2 - t1)]
        steps = -(-self.s.epoch_samples // self.s.batch_size)
        for key, (step, ev) in best.items():
            self._cache[key] = (steps * step, ev_scale * ev)

    def conditions(self) -> dict[str, Any]:
        """What the costs depend on: the model and the work per step, epoch and evaluation.

        Scenarios that agree on these (the five of the issue differ only in the "up" time) can
        share one clock (``load_clock``), so their tables differ by the scenario alone and not by
        the load on the host while each was measured.
        """
        return {k: getattr(self.s, k) for k in CLOCK_FIELDS}

    def measured(self, model: torch.nn.Module) -> tuple[float, float] | None:
        """(epoch seconds, evaluation seconds) of ``model`` if measured, without measuring it."""
        return self._cache.get(structure_key(model))

    def to_json(self) -> dict[str, Any]:
        """The measured costs with the scenario they were measured for (``load`` checks it)."""
        return {"scenario": repr(self.s), "clock": self.conditions(), "rounds": self.rounds,
                "costs": [[repr(k), e, v] for k, (e, v) in self._cache.items()]}

    def load_clock(self, data: dict[str, Any], source: str) -> None:
        """Take a clock measured elsewhere (``hetune adapt clock``, or another table's cost file).

        Refused, with what differs, when it was measured for another model or other work per
        step, epoch or evaluation, or lacks a structure this scenario can reach.
        """
        theirs = data.get("clock")
        if not isinstance(theirs, dict):
            raise ConfigError(source, "clock", "has no measurement conditions: measure one with "
                              "`hetune adapt clock` (cost files of tables built before it lack them)")
        for k, v in self.conditions().items():
            if theirs.get(k) != v:
                raise ConfigError(source, f"clock.{k}", f"was measured for {theirs.get(k)!r}, this scenario has {v!r}")
        try:
            costs = {k: (float(e), float(v)) for k, e, v in data.get("costs", [])}
        except (TypeError, ValueError):
            raise ConfigError(source, "costs", "expected [structure, epoch seconds, evaluation seconds] rows") from None
        for m in reachable_models(self.s):
            key = structure_key(m)
            if repr(key) not in costs:
                raise ConfigError(source, "costs", "lacks a structure this scenario reaches")
            self._cache[key] = costs[repr(key)]
        self.rounds = int(data.get("rounds", self.rounds))  # recorded with the costs they gave

    def load(self, data: dict[str, Any], source: str) -> None:
        """Take the costs of an earlier build (``to_json``), so added repeats run on the same clock."""
        now = repr(self.s)
        # a build from before ema_decay existed scored the last weights: the same as ema_decay = 0;
        # one from before base_epoch_s existed charged measured seconds x time_scale: base_epoch_s = 0
        older = now.replace(", base_epoch_s=0.0)", ")") if self.s.base_epoch_s == 0.0 else now
        oldest = older.replace("ema_decay=0.0, ", "") if self.s.ema_decay == 0.0 else older
        if data.get("scenario") not in (now, older, oldest):
            raise ConfigError(source, "scenario", "was measured for another scenario than this one "
                              "(the scenario file or --set changed): build the table afresh without --resume")
        by_repr = {repr(structure_key(m)): structure_key(m) for m in reachable_models(self.s)}
        for k, e, v in data["costs"]:
            if k in by_repr:
                self._cache[by_repr[k]] = (float(e), float(v))


def read_clock(s: Scenario, path: str | Path) -> EpochCost:
    """The clock in ``path`` (``hetune adapt clock``'s file, or a table's cost file), checked against ``s``."""
    import json
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "", "no such clock file (write one with `hetune adapt clock`)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"not a JSON clock file ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", "not a clock file (expected a JSON object)")
    cost = EpochCost(s)
    cost.load_clock(data, str(path))
    return cost


def measure_clock(s: Scenario, rounds: int = 40, seed: int = 0) -> EpochCost:
    """Measure the cost of every structure ``s`` can reach, once, for several scenarios to share.

    Each table measuring its own clock lets the host's load while it was measured into the
    table: of the five scenario tables built here so, one (late) measured the base model's epoch
    13% dearer than a clock measured on a quiet host, and deepened models up to a third dearer
    still relative to it. More rounds than a table's own measurement, because the fastest round of
    each structure is what counts.
    """
    cost = EpochCost(s, rounds=rounds)
    with tempfile.TemporaryDirectory(prefix="hetune-clock-") as tmp:
        xtr, _, xte, _ = scenario_data(s, seed, Path(tmp))
    torch.set_num_threads(1)  # as build_table trains
    cost.prime(reachable_models(s), xtr, xte[: s.test_samples])
    return cost


def reachable_models(s: Scenario) -> list[torch.nn.Module]:
    """The base model deepened by every prefix of every action sequence (85 models, ~20 structures)."""
    return [deepened(s.model, prefix) for depth in range(4) for prefix in prefixes(depth)]
