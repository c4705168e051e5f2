"""The closed sets of names the engines compare: orderings, trial statuses, device kinds.

Each member is its own string (``TrialStatus.PAUSED == "paused"``), so the events file, the TOML
configs and JSON keep exactly the strings they always had, and a new member (a TPU, a MIG slice)
is one line here that a type checker then follows to every branch on it.
"""

from __future__ import annotations

from enum import Enum, StrEnum


class Ordering(str, Enum):
    """Orders in which a strategy may ask for the next runnable trial (ties: lower trial id first)."""

    LEAST_PROGRESSED = "least_progressed"  # fewest iterations done
    MOST_PROGRESSED = "most_progressed"  # most iterations done
    BEST_RANKED = "best_ranked"  # best last score, as pbt.mode defines best; unscored trials last
    WORST_RANKED = "worst_ranked"  # worst last score; unscored trials first
    FIFO = "fifo"  # trial id


# StrEnum rather than (str, Enum): f-strings and str() give the value ("paused"), not
# "TrialStatus.PAUSED", so messages and files that format a member read as before.
class TrialStatus(StrEnum):
    """Where a trial stands, in either engine (the simulator's Trial, the Ray side's TrialState)."""

    PENDING = "pending"  # never ran
    RUNNING = "running"  # on a worker (on the Ray side also: reserved for a slot)
    PAUSED = "paused"  # ran, and waits for a worker
    WAITING = "waiting"  # simulator only: at synch PBT's barrier, or a replayed clone awaiting its donor
    STOPPED = "stopped"  # finished: reached the target or the iteration limit, or failed for good

    @property
    def runnable(self) -> bool:
        """Whether a strategy may choose the trial now (pending or paused)."""
        return self in (TrialStatus.PENDING, TrialStatus.PAUSED)


class DeviceKind(StrEnum):
    """What a worker of a device type holds: whole GPUs, or CPU cores (a cluster file's ``kind``)."""

    GPU = "gpu"
    CPU = "cpu"
