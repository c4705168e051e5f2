"""Random factors on a simulated run's seconds: what calibrate's repeats, recorded runs and repeated
calibrations show a device type's times to do from chunk to chunk and from run to run.

Three spreads, each a relative standard deviation on a device model (sim/throughput.py), each
drawn as a log-normal factor of mean 1 (so the expected seconds stay the calibrated ones):

- ``step_cv`` (or ``step_cv_batch`` at the experiment's batch size, where that batch was measured):
  one factor per chunk on its compute, training and evaluation alike (the other slots' load, which
  changes as trials start and stop, slows both);
- ``overhead_cv``: one factor per trial start, restart, restore and save;
- ``drift_cv``: one factor per device type per run on its compute (a host's speed between two
  calibrations: the whole run is faster or slower than calibrated, and no strategy knows it).

Each spread has its own random stream, spawned from the run's seed after the older streams, so a
calibration without a spread gives the same runs, draw for draw, as before the spread existed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hetune.sim.recorded_seconds import RecordedSeconds
    from hetune.sim.state import Trial
    from hetune.sim.throughput import DeviceModel


def lognormal_factor(rng: np.random.Generator, cv: float) -> float:
    """A factor of mean 1 and relative standard deviation ``cv`` (exactly 1, with no draw, if cv is 0)."""
    if cv <= 0:
        return 1.0
    s2 = math.log1p(cv * cv)
    return float(rng.lognormal(-s2 / 2, math.sqrt(s2)))


class TimingNoise:
    """The step, overhead and drift factors of one simulated run.

    Args:
        root: the run's SeedSequence (its older children already spawned).
        batch: the experiment's batch size, samples (picks ``step_cv_batch``'s entry).
    """

    def __init__(self, root: np.random.SeedSequence, batch: int) -> None:
        self.batch = batch
        self.step_rng = np.random.default_rng(root.spawn(1)[0])
        self.overhead_rng = np.random.default_rng(root.spawn(1)[0])
        self.drift_rng = np.random.default_rng(root.spawn(1)[0])
        self._drift: dict[str, float] = {}

    def under(self, seconds: RecordedSeconds | None) -> TimingNoise | RecordedSeconds:
        """``seconds`` (a recorded run's), with these factors where it has none; or these factors alone."""
        return self if seconds is None else seconds.over(self)

    def step_cv(self, dm: DeviceModel) -> float:
        """The chunk spread at this run's batch size: measured there, or pooled over batch sizes."""
        return dm.step_cv_batch.get(str(self.batch), dm.step_cv)

    def compute(self, device: str, dm: DeviceModel) -> float:
        """The factor on one chunk's seconds (training and evaluation) on a worker of type ``device``."""
        return self.drift(device, dm) * lognormal_factor(self.step_rng, self.step_cv(dm))

    def drift(self, device: str, dm: DeviceModel) -> float:
        """This run's factor for device type ``device``: drawn at its first use, then kept."""
        if device not in self._drift:
            self._drift[device] = lognormal_factor(self.drift_rng, dm.drift_cv)
        return self._drift[device]

    def overhead(self, dm: DeviceModel) -> float:
        """The factor on one start, restart, restore or save."""
        return lognormal_factor(self.overhead_rng, dm.overhead_cv)

    # The engine's seconds, each from its nominal value (sim/recorded_seconds.py answers the same
    # questions with a recorded run's own seconds). ``trial`` is unused here.
    def start_s(self, trial: Trial, dm: DeviceModel) -> float:
        """Seconds of a trial's first start."""
        return dm.start_overhead_s * self.overhead(dm)

    def restore_s(self, trial: Trial, dm: DeviceModel, copy_s: float) -> tuple[float, float, float]:
        """Seconds of a restart from a checkpoint: (restart, copy, load); ``copy_s`` is the nominal copy."""
        f = self.overhead(dm)
        return dm.restart_s * f, copy_s, dm.load_s * f

    def chunk_s(self, trial: Trial, device: str, dm: DeviceModel, iterations: int, train_s: float,
                eval_s: float) -> tuple[float, float]:
        """Seconds of one chunk's training and evaluation, from their nominal seconds."""
        f = self.compute(device, dm)
        return train_s * f, eval_s * f

    def save_s(self, trial: Trial, dm: DeviceModel, upload_s: float) -> float:
        """Seconds of one checkpoint save and its upload to storage (``upload_s``, not varied)."""
        return dm.save_s * self.overhead(dm) + upload_s
