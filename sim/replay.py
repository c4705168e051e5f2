"""Replay a recorded population (simulated or real) under any strategy: the what-if question
"how long would this exact run have taken under strategy X".

From a recorded events.jsonl it takes each trial's initial config, its
accuracies per iteration and every exploit (donor, donor iteration, new
config). The replay applies each recorded exploit at the trial's recorded
iteration whatever the ranking says, and reports the recorded accuracy at
the latest recorded iteration at or before the trial's current one. For
synchronous PBT this reproduces the population exactly; for asynchronous PBT
the recorded decisions depended on the recorded timing, so the replay keeps
the decisions and changes only the timing (an approximation: in the new
timing a donor may not yet have reached the iteration it is cloned at).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any, Callable

import numpy as np

from hetune.sim.errors import ConfigError
from hetune.sim.population import Clone


class ReplayPopulation:
    """A recorded population.

    Args:
        events: the recorded event log.
        where: its file name, for messages.
    """

    def __init__(self, events: list[dict[str, Any]], where: str) -> None:
        self.configs: dict[int, dict[str, float]] = {}
        self.exploits: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.points: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
        segment: dict[int, int] = defaultdict(int)
        pending_config: dict[int, dict[str, Any]] = {}
        for e in events:
            t = e["trial"]
            if e["kind"] == "trial_start" and t not in self.configs:
                self.configs[t] = {k: float(v) for k, v in e["config"].items()}
            elif e["kind"] == "chunk" and e["accuracy"] is not None:
                self.points[(t, segment[t])].append((int(e["iteration"]), float(e["accuracy"])))
            elif e["kind"] == "exploit":
                rec: dict[str, Any] = {"iteration": int(e["iteration"]), "donor": int(e["donor"]),
                       "donor_iteration": int(e["donor_iteration"]), "new_config": None, "operations": {}}
                self.exploits[t].append(rec)
                pending_config[t] = rec
                segment[t] += 1
            elif e["kind"] == "explore" and t in pending_config:
                pending_config[t]["new_config"] = {k: float(v) for k, v in e["new_config"].items()}
                pending_config[t]["operations"] = dict(e.get("operations") or {})
                del pending_config[t]
        if not self.configs:
            raise ConfigError(where, "", "no trial_start events: nothing to replay")
        ids = sorted(self.configs)
        if ids != list(range(len(ids))):
            raise ConfigError(where, "", f"trials must be numbered 0..n-1, got {ids[:5]}...")
        for pts in self.points.values():
            pts.sort()
        self.applied: dict[int, int] = defaultdict(int)

    def population(self, default: int) -> int:
        return len(self.configs)

    def initial_config(self, trial_id: int, rng: np.random.Generator) -> dict[str, float]:
        return dict(self.configs[trial_id])

    def initial_state(self, trial: Any) -> Any:
        return 0.0  # a replay carries recorded accuracies, no model state

    def chunk(self, trial: Any, iterations: int, evaluate: bool) -> None:
        if not evaluate and trial.accuracy is not None:
            return
        seg = self.applied[trial.id]
        pts = self.points.get((trial.id, seg), [])
        i = bisect.bisect_right(pts, (trial.iteration, float("inf")))
        if i:
            trial.accuracy = pts[i - 1][1]
        elif trial.accuracy is None:
            trial.accuracy = 0.0  # no recorded evaluation yet in this lineage

    def clone(self, trial: Any, bottom: bool, pick_donor: Callable[[], Any],
              explore: Callable[[dict[str, float]], tuple[dict[str, float], dict[str, str]]]) -> Clone | None:
        recs = self.exploits.get(trial.id, [])
        k = self.applied[trial.id]
        if k >= len(recs) or recs[k]["iteration"] > trial.iteration:
            return None
        rec = recs[k]
        self.applied[trial.id] = k + 1
        new = rec["new_config"] or dict(trial.config)
        return Clone(rec["donor"], rec["donor_iteration"], 0.0, new, rec["operations"])
