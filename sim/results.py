"""A run's result folder: events.jsonl, summary.json, config.toml, all written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetune.sim import events as ev
from hetune.sim.loader import RunInputs
from hetune.sim.schema import to_mapping
from hetune.sim.anytime import anytime_curve
from hetune.sim.summary import summarize
from hetune.sim.tomlfile import atomic_write_json, atomic_write_text, atomic_write_toml


def prices(inputs: RunInputs) -> dict[str, float]:
    """Device type -> dollars per device-hour from the cluster file."""
    return {name: d.price_per_hour for name, d in inputs.cluster.devices.items()}


def run_summary(inputs: RunInputs, events: list[dict[str, Any]], strategy: str, seed: int) -> dict[str, Any]:
    """The metric set of one run plus what produced it."""
    info = inputs.experiment.experiment
    out = summarize(events, info.target_accuracy, prices(inputs), info.budget_s, info.budget_cost)
    out.update({"strategy": strategy, "seed": seed, "experiment": inputs.experiment.experiment.name})
    return out


def resolved_config(inputs: RunInputs, strategy: str, seed: int) -> dict[str, Any]:
    """The fully resolved experiment, with the strategy and seed of the run and the cluster and
    calibration contents embedded under [resolved] for the record."""
    data = inputs.resolved()
    data["strategy"] = {"name": strategy}
    data["experiment"]["seed"] = seed
    return data


def write_run(out_dir: str | Path, inputs: RunInputs, events: list[dict[str, Any]], strategy: str, seed: int,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the three files of a run; events first and summary last, so a folder whose
    summary.json exists is complete.

    Args:
        out_dir: result folder (created).
        inputs: what was run.
        events: the event log.
        strategy: strategy name.
        seed: the seed.
        extra: more summary fields (e.g. {"kind": "real"}).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_toml(out / "config.toml", resolved_config(inputs, strategy, seed))
    atomic_write_toml(out / "cluster.toml", to_mapping(inputs.cluster))
    atomic_write_toml(out / "calibration.toml", to_mapping(inputs.calibration))
    atomic_write_text(out / "events.jsonl", ev.dumps(events))
    summary = run_summary(inputs, events, strategy, seed)
    summary["kind"] = "sim"
    summary["anytime"] = anytime_curve(events, prices(inputs))  # [t s, best accuracy, cost $] per improvement
    summary.update(extra or {})
    atomic_write_json(out / "summary.json", summary)
    return summary
