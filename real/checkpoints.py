"""Keep only the checkpoints that PBT and resuming need, so a real run's disk stays small.

Tune keeps every checkpoint of a trial unless told a number to keep, and a number is unsafe
under PBT: a donor's checkpoint must outlive however many saves the donor makes before the
exploited trial restarts from it. This callback deletes, after every save, each checkpoint of
that trial that nothing refers to any more. Referred to: every trial's latest checkpoint (what
it resumes from, an exploited trial's being its donor's) and every checkpoint PBT keeps for
donors (``last_checkpoint`` of its trial state).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ray.tune import Callback


class PruneCheckpoints(Callback):
    """Delete a trial's checkpoints that neither a trial nor PBT refers to.

    Args:
        pbt: the run's PopulationBasedTraining (its per-trial state names the donors' checkpoints).
    """

    def __init__(self, pbt: Any) -> None:
        self.pbt = pbt
        self.deleted = 0

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
        keep = {_path(checkpoint)}
        for t in trials:
            keep.add(_path(getattr(t, "checkpoint", None)))
        for owner, state in getattr(self.pbt, "_trial_state", {}).items():  # no public getter in Ray 2.60
            held = getattr(state, "last_checkpoint", None)
            if held is not None and hasattr(held, "resolve"):  # a save PBT scheduled: known once it is done
                done = held.resolve(block=False)
                if done is None:
                    if owner is trial:
                        return  # this trial's donor checkpoint is still being written: delete nothing now
                    continue
                held = done.checkpoint
            keep.add(_path(held))
        current = Path(str(checkpoint.path))
        for old in sorted(current.parent.glob("checkpoint_*")):
            # only older ones: a newer folder may be a save still being written
            if old.is_dir() and old.name < current.name and str(old) not in keep:
                shutil.rmtree(old, ignore_errors=True)
                self.deleted += 1


def _path(ckpt: Any) -> str:
    """The folder of a Checkpoint; "" for None."""
    path = getattr(ckpt, "path", None)
    return str(Path(str(path))) if path else ""
