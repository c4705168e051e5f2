"""A run's result folder: its frozen inputs (sim/snapshot.py), events.jsonl and summary.json, all
written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetune.sim import events as ev
from hetune.sim.loader import RunInputs
from hetune.sim.anytime import anytime_curve
from hetune.sim.snapshot import read_manifest, write_snapshot
from hetune.sim.summary import summarize
from hetune.sim.tomlfile import atomic_write_json, atomic_write_text


def prices(inputs: RunInputs) -> dict[str, float]:
    """Device type -> dollars per device-hour from the cluster file."""
    return {name: d.price_per_hour for name, d in inputs.cluster.devices.items()}


def run_summary(inputs: RunInputs, events: list[dict[str, Any]], strategy: str, seed: int) -> dict[str, Any]:
    """The metric set of one run plus what produced it."""
    info = inputs.experiment.experiment
    out = summarize(events, info.target_accuracy, prices(inputs), info.budget_s, info.budget_cost)
    out.update({"strategy": strategy, "seed": seed, "experiment": inputs.experiment.experiment.name})
    return out


def write_run(out_dir: str | Path, inputs: RunInputs, events: list[dict[str, Any]], strategy: str, seed: int,
              extra: dict[str, Any] | None = None, frozen: bool = False) -> dict[str, Any]:
    """Write a run's files: the input snapshot, events, then the summary last, so a folder whose
    summary.json exists is complete.

    Args:
        out_dir: result folder (created).
        inputs: what was run.
        events: the event log.
        strategy: strategy name.
        seed: the seed.
        extra: more summary fields (e.g. {"kind": "real"}).
        frozen: the folder already holds the snapshot the run was started with (a real run froze
            it before Ray started): checked against its hashes, never rewritten.
    """
    out = Path(out_dir)
    if frozen:
        read_manifest(out)
    else:
        write_snapshot(out, inputs, strategy, seed, frozen="with the run's results (a simulated run)")
    atomic_write_text(out / "events.jsonl", ev.dumps(events))
    summary = run_summary(inputs, events, strategy, seed)
    summary["kind"] = "sim"
    summary["anytime"] = anytime_curve(events, prices(inputs))  # [t s, best accuracy, cost $] per improvement
    summary.update(extra or {})
    atomic_write_json(out / "summary.json", summary)
    return summary
