"""The shared event log: one JSON object per line, written by simulator and real runs alike.

Every event has the fields of ``BASE_FIELDS`` (null where not applicable):
``t`` is when the event completed, in seconds since the run started; events
that take time carry ``duration_s``, so the activity ran over
[t - duration_s, t]. Kind-specific fields are listed in ``KIND_FIELDS``. On a
``trial_start`` or ``resume``, ``iteration`` is the iteration the trial starts from (0, its
checkpoint's, or after an exploit its donor's) and ``accuracy`` the reading there; real runs recorded
before 2026-12-07 wrote the first result's iteration there under PBT (one more).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from hetune.sim.errors import ConfigError

BASE_FIELDS = ("t", "kind", "trial", "iteration", "accuracy", "worker", "node", "device")

KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "worker_added": ("devices",),
    "worker_removed": ("devices",),
    "trial_start": ("config", "duration_s"),
    "resume": ("duration_s", "load_s", "copy_s"),
    "chunk": ("iterations", "duration_s"),
    "checkpoint": ("duration_s",),
    "exploit": ("donor", "donor_iteration", "duration_s", "load_s", "copy_s"),
    "explore": ("old_config", "new_config", "operations"),
    "pause": (),
    "stop": ("reason",),
    "failure": ("reason", "lost_iterations"),
    "adapt": ("actions", "step_factor"),
    # a strategy's answer for a free worker: "run" (trial, iterations asked, restart) or "retire"
    "decision": ("action", "iterations"),
}

# Kinds whose duration_s is device time spent saving, loading or copying checkpoints.
CHECKPOINT_KINDS = ("checkpoint", "resume", "exploit")

# Kinds whose duration_s keeps a worker busy (what utilization and the timeline count).
BUSY_KINDS = ("trial_start", "resume", "chunk", "checkpoint", "exploit")


def make_event(t: float, kind: str, *, trial: int | None = None, iteration: int | None = None,
               accuracy: float | None = None, worker: int | None = None, node: str | None = None,
               device: str | None = None, **extra: Any) -> dict[str, Any]:
    """Build one event with the base fields first, in a fixed order.

    Args:
        t: seconds since the run started when the event completed.
        kind: one of KIND_FIELDS.
        trial, iteration, accuracy, worker, node, device: base fields.
        extra: kind-specific fields.
    """
    ev: dict[str, Any] = {"t": round(float(t), 6), "kind": kind, "trial": trial, "iteration": iteration,
                          "accuracy": None if accuracy is None else round(float(accuracy), 6),
                          "worker": worker, "node": node, "device": device}
    ev.update(extra)
    return ev


def validate_event(ev: Any, where: str) -> None:
    """Raise ConfigError naming ``where`` unless ``ev`` follows the schema.

    Args:
        ev: a decoded JSON value.
        where: "file:line" for the message.
    """
    if not isinstance(ev, dict):
        raise ConfigError(where, "", "an event must be a JSON object")
    for f in BASE_FIELDS:
        if f not in ev:
            raise ConfigError(where, f, "missing event field")
    kind = ev["kind"]
    if kind not in KIND_FIELDS:
        raise ConfigError(where, "kind", f"unknown event kind {kind!r}")
    if not isinstance(ev["t"], (int, float)) or ev["t"] < 0:
        raise ConfigError(where, "t", f"must be a time >= 0, got {ev['t']!r}")
    for f in KIND_FIELDS[kind]:
        if f not in ev:
            raise ConfigError(where, f, f"missing field for a {kind} event")
    acc = ev["accuracy"]
    if acc is not None and not (isinstance(acc, (int, float)) and 0 <= acc <= 1):
        raise ConfigError(where, "accuracy", f"must be in [0, 1] or null, got {acc!r}")


def dumps(events: Iterable[dict[str, Any]]) -> str:
    """Serialise events as JSON Lines (deterministic: fixed key order, repr floats)."""
    return "".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate an events.jsonl file; a bad or truncated line is an error naming it.

    Args:
        path: the events file.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "", "file not found")
    out = []
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                raise ConfigError(f"{p}:{n}", "", "truncated last line (the run was interrupted?)")
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{p}:{n}", "", f"not valid JSON ({exc.msg})") from None
            validate_event(ev, f"{p}:{n}")
            out.append(ev)
    return out


def iter_kind(events: Iterable[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    """Events of one kind, in log order."""
    return (e for e in events if e["kind"] == kind)
