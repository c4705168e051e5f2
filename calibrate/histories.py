"""Trial histories: what a learning-model fit reads from recorded runs, whatever recorded them.

A trial's history is a list of segments. A segment starts from a fresh network (iteration 0) or from
another trial's checkpoint (a PBT exploit: the donor, its iteration, and which of the donor's own
segments held that checkpoint), and holds readings in training order. A reading covers the
iterations since the previous one, trained at one configuration (lr, momentum), and may carry a
test accuracy and a training loss measured at its end.

Two sources build them: hetune's event logs (``from_events``: simulated or real runs) and Ray Tune
experiment folders (calibrate/tune_folder.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from hetune.sim.errors import ConfigError


@dataclass(frozen=True)
class Reading:
    """Iterations (prev, iteration] trained at (lr, momentum); accuracy/loss at the end if measured."""

    iteration: int
    lr: float
    momentum: float
    accuracy: float | None = None
    loss: float | None = None


@dataclass(frozen=True)
class Origin:
    """Where a segment's weights came from: ``donor``'s checkpoint at ``iteration``, taken from the
    donor's segment number ``segment``."""

    donor: str
    iteration: int
    segment: int


@dataclass
class Segment:
    start: int = 0
    origin: Origin | None = None
    readings: list[Reading] = field(default_factory=list)


@dataclass
class History:
    """One trial of one run: ``key`` names it uniquely across runs ("run/trial"), ``batch`` is its
    global batch (examples per iteration) and ``source`` the file it was read from (for messages)."""

    key: str
    batch: int
    source: str
    segments: list[Segment] = field(default_factory=lambda: [Segment()])

    def readings(self) -> Iterable[Reading]:
        for s in self.segments:
            yield from s.readings


def exploit(histories: dict[str, History], target: str, donor: str, donor_iteration: int) -> None:
    """Start a new segment of ``target`` from ``donor``'s checkpoint (its current segment)."""
    if donor not in histories:
        raise ValueError(f"exploit from unknown trial {donor}")
    histories[target].segments.append(
        Segment(donor_iteration, Origin(donor, donor_iteration, len(histories[donor].segments) - 1)))


def from_events(events: list[dict[str, Any]], run: str, batch: int, source: str,
                momentum: float | None = None) -> list[History]:
    """Histories from an event log (sim/events.py): trial_start, chunk, exploit and explore events.

    A chunk's accuracy counts as a reading only where it evaluated (``eval_s`` > 0, or absent); its
    optional ``loss`` field is the training loss at its end.

    Args:
        events: the run's events in order.
        run: a name for the run, unique among the runs fitted together.
        batch: the run's global batch.
        source: the events file, named in messages.
        momentum: used where a config holds no momentum (None: such a config is refused).
    """
    out: dict[str, History] = {}
    config: dict[str, tuple[float, float]] = {}

    def lr_m(cfg: dict[str, Any], what: str) -> tuple[float, float]:
        return _lr_momentum(cfg, momentum, f"{source}: {what}")

    for e in events:
        kind = e.get("kind")
        if e.get("trial") is None:
            continue
        key = f"{run}/{e['trial']}"
        if kind == "trial_start":
            out[key] = History(key, batch, source)
            config[key] = lr_m(e.get("config") or {}, f"trial {e['trial']}'s config")
        elif key not in out:
            continue
        elif kind == "chunk" and int(e.get("iterations") or 0) > 0:
            evaluated = e.get("accuracy") is not None and float(e.get("eval_s", 1.0) or 0.0) > 0
            lr, m = config[key]
            out[key].segments[-1].readings.append(Reading(
                int(e["iteration"]), lr, m, float(e["accuracy"]) if evaluated else None,
                float(e["loss"]) if e.get("loss") is not None else None))
        elif kind == "exploit":
            exploit(out, key, f"{run}/{e['donor']}", int(e["donor_iteration"]))
        elif kind == "explore":
            config[key] = lr_m(e.get("new_config") or {}, f"trial {e['trial']}'s explored config")
    return list(out.values())


def _lr_momentum(cfg: dict[str, Any], momentum: float | None, where: str) -> tuple[float, float]:
    """(lr, momentum) of a config; a missing or non-numeric lr, or a missing momentum without a
    default, is bad input naming ``where``."""
    try:
        lr = float(cfg["lr"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(where, "lr", "no numeric learning rate 'lr': the learning model needs it") from None
    if "momentum" in cfg:
        try:
            return lr, float(cfg["momentum"])
        except (TypeError, ValueError):
            raise ConfigError(where, "momentum", f"not a number: {cfg['momentum']!r}") from None
    if momentum is None:
        raise ConfigError(where, "momentum", "no 'momentum' in the config: pass --momentum with the value the "
                                              "runs used")
    return lr, momentum


def summary(histories: list[History]) -> dict[str, Any]:
    """What the data hold: readings, distinct learning rates and batches, trials whose lr changed."""
    lrs, batches, changed, accs, losses = set(), set(), 0, 0, 0
    for h in histories:
        seen = set()
        for r in h.readings():
            lrs.add(r.lr)
            seen.add(r.lr)
            accs += r.accuracy is not None
            losses += r.loss is not None
        batches.add(h.batch)
        changed += len(seen) > 1
    return {"trials": len(histories), "accuracies": accs, "losses": losses, "lrs": sorted(lrs),
            "batches": sorted(batches), "lr_changes": changed}
