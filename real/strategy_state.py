"""The StrategyScheduler's own state file: what a resumed run needs that Tune does not save.

Tune does not save schedulers (``Tuner.restore`` brings back the pickled scheduler of the first
start, as it was then). So after every answer of the strategy the scheduler writes, whole and then
renamed (a kill leaves the last state): the strategy object, PBT's per-trial state, and how many
lines of the view log (sim/view_log.py) that strategy object has seen, where a resumed run cuts
the log so that its replay stays exact.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from hetune.real.recorder import trial_index
from hetune.sim.strategies.base import Strategy
from hetune.sim.tomlfile import atomic_replace


def pbt_state(pbt: Any) -> dict[int, dict[str, Any]]:
    """Per trial index, what PBT needs to go on where it was: the last perturbation point
    (iterations), last score and, once persisted, the checkpoint it would hand to an exploiter
    with the result it was saved at (Tune restores an exploiter from both).
    Without it a resumed run would perturb every trial at its first result, cloning donors from
    wherever they happen to be."""
    from ray.tune import Checkpoint

    out = {}
    for trial, st in getattr(pbt, "_trial_state", {}).items():
        ckpt = st.last_checkpoint if isinstance(st.last_checkpoint, Checkpoint) else None
        out[trial_index(trial)] = {"last_perturbation_time": st.last_perturbation_time,
                                   "last_train_time": st.last_train_time, "last_score": st.last_score,
                                   "last_checkpoint": ckpt,
                                   "last_result": dict(st.last_result) if st.last_result else None}
    return out


def save_state(path: Path, strategy: Strategy, pbt: Any, view_lines: int) -> None:
    """Write the strategy, PBT's state and the view log's line count to ``path``."""
    atomic_replace(path, pickle.dumps({"strategy": strategy, "pbt": pbt_state(pbt), "views": view_lines}))


Saved = tuple[Strategy, dict[int, dict[str, Any]], int | None]


def load_state(path: Path | None, kind: type[Strategy]) -> Saved | None:
    """(strategy, PBT state per trial index, view-log lines) saved at ``path``; None where nothing is
    saved or the saved strategy is not a ``kind`` (another strategy's run: start fresh, never mix)."""
    if path is None or not path.is_file():
        return None
    with path.open("rb") as fh:
        saved = pickle.load(fh)
    strategy = saved.get("strategy") if isinstance(saved, dict) else saved  # the oldest files: the strategy only
    if type(strategy) is not kind:
        return None
    if not isinstance(saved, dict):
        return strategy, {}, None
    return strategy, saved.get("pbt", {}), saved.get("views")
