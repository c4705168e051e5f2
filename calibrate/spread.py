"""How much a device type's seconds vary: measured from recorded runs and from repeated calibrations
of one host, written into a calibration as the spreads the simulator draws from (sim/timing_noise.py).

- ``step_cv_batch`` (and the pooled ``step_cv``): per device type, the relative standard deviation
  of a recorded chunk's training seconds per iteration (evaluation left out: it is timed apart),
  among the chunks of workers of one size, at the runs' batch size;
- ``overhead_cv``: per device type, the relative standard deviation of recorded saves and restores
  (root mean square of the two);
- ``drift_cv``: per device type, the standard deviation between calibrations of the log of the
  calibrated step time (averaged over the batch sizes the base calibration measured), as a
  relative spread. Two calibrations hours apart are one sample of a host's drift; more are better.

Recorded runs used here must not be the runs a benchmark judges (a spread fitted to them would be
tuned to their outcome): the fidelity benchmark uses its separate curve run.
"""

from __future__ import annotations

import json

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from hetune.calibrate.build import pooled_cv
from hetune.calibrate.curves import read_runs, relative_name
from hetune.sim.errors import ConfigError
from hetune.sim.schema import from_mapping
from hetune.sim.throughput import CalibrationConfig, load_calibration
from hetune.sim.tomlfile import atomic_write_toml, read_toml

MIN_SAMPLES = 5  # fewer chunks or overheads than this measure no spread


def _cv(values: list[float]) -> float | None:
    """Relative sample standard deviation; None with fewer than MIN_SAMPLES values or a zero mean."""
    if len(values) < MIN_SAMPLES or statistics.mean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.mean(values)


def run_spreads(runs: list[str]) -> dict[str, dict[str, Any]]:
    """Per device type: ``step_cv_batch`` (batch size -> spread), its ``chunks``, and ``overhead_cv``
    with its ``overheads`` count, from recorded runs (run folders or events.jsonl files)."""
    rates: dict[tuple[str, int, int], list[float]] = defaultdict(list)  # (device, worker size, batch) -> s/iteration
    saves: dict[str, list[float]] = defaultdict(list)
    loads: dict[str, list[float]] = defaultdict(list)
    for path, run in zip(runs, read_runs(runs)):
        if run.batch is None:
            raise ConfigError(path, "", "no config.toml beside these events, so their batch size is unknown")
        size = {e["worker"]: int(e.get("devices") or 1) for e in run.events if e["kind"] == "worker_added"}
        for e in run.events:
            device = e.get("device")
            if not device:
                continue
            if e["kind"] == "chunk" and int(e.get("iterations") or 0) > 0:
                train_s = float(e["duration_s"]) - float(e.get("eval_s") or 0)
                rates[(device, size.get(e["worker"], 1), run.batch)].append(train_s / int(e["iterations"]))
            elif e["kind"] == "checkpoint":
                saves[device].append(float(e["duration_s"]))
            elif e["kind"] == "resume":
                loads[device].append(float(e["duration_s"]) - float(e.get("copy_s") or 0))
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    per_batch: dict[tuple[str, int], list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for (device, _, batch), values in rates.items():
        cv = _cv(values)
        if cv is not None:
            per_batch[(device, batch)].append(cv)
            counts[device] += len(values)
    for (device, batch), cvs in per_batch.items():
        out[device].setdefault("step_cv_batch", {})[str(batch)] = pooled_cv(cvs)
        out[device]["chunks"] = counts[device]
    for device in set(saves) | set(loads):
        cvs = [c for c in (_cv(saves[device]), _cv(loads[device])) if c is not None]
        if cvs:
            out[device]["overhead_cv"] = pooled_cv(cvs)
            out[device]["overheads"] = len(saves[device]) + len(loads[device])
    return dict(out)


def _frozen(folder: Path) -> str:
    """The manifest's note of when a run folder's inputs were frozen ("" without one)."""
    try:
        return str(json.loads((folder / "inputs.json").read_text()).get("frozen", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def drift_spreads(base: Path, others: list[Path]) -> dict[str, dict[str, float]]:
    """Per (model, device type) of ``base`` also calibrated in every other file: the drift spread."""
    cals = [load_calibration(p) for p in [base, *others]]
    batches = _measured_batches(read_toml(base))
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for model, rows in cals[0].models.items():
        for device, dm in rows.items():
            if not all(device in c.models.get(model, {}) for c in cals[1:]):
                continue
            bs = batches.get((model, device)) or [1]
            logs = [statistics.mean(math.log(c.models[model][device].alpha_s
                                             + c.models[model][device].beta_s_per_sample * b) for b in bs)
                    for c in cals]
            sd = statistics.stdev(logs)
            out[model][device] = math.sqrt(math.expm1(sd * sd))  # the log-normal's relative spread
    return dict(out)


def _measured_batches(data: dict[str, Any]) -> dict[tuple[str, str], list[int]]:
    """The batch sizes each (model, device type) row of a calibration file was measured at."""
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for s in data.get("samples", []):
        if s.get("ok", True) and not s.get("heldout"):
            out[(str(s.get("model")), str(s.get("device")))].add(int(s.get("batch", 0)))
    return {k: sorted(b for b in v if b > 0) for k, v in out.items()}


def write_spread(base: Path, runs: list[str], drift: list[Path], model: str, out: Path) -> dict[str, Any]:
    """Write ``base`` with the measured spreads of ``model``'s rows to ``out``; returns what was measured.

    Args:
        base: the calibration to add the spreads to (refused if it does not load).
        runs: recorded runs (run folders or events.jsonl files), not ones that will be judged.
        drift: other calibrations of the same host and cluster, made at other times.
        model: the model whose rows get the spreads (the runs' model).
        out: the calibration file to write.
    """
    if not runs and not drift:
        raise ConfigError("hetune calibrate spread", "", "nothing to measure: name recorded runs, --drift, or both")
    cal = load_calibration(base)
    rows = cal.models.get(model)
    if not rows:
        raise ConfigError(str(base), "models", f"has no rows for {model!r}")
    for r in runs:  # a simulated run's seconds are the calibration's own: they measure nothing
        folder = Path(r) if Path(r).is_dir() else Path(r).parent
        frozen = _frozen(folder)
        if "simulated" in frozen:
            raise ConfigError(r, "", "a simulated run: its seconds come from a calibration, not a machine; name "
                                     "real runs (hetune validate)")
    for p in [base, *drift] if drift else []:
        if not str(read_toml(p).get("provenance", {}).get("host", "")).strip():
            raise ConfigError(str(p), "provenance.host", "missing: drift is measured between calibrations of one "
                                                         "host (hetune calibrate records it); published rows have none")
    hosts = {str(read_toml(p)["provenance"]["host"]) for p in [base, *drift]} if drift else set()
    if len(hosts) > 1:
        raise ConfigError(str(drift[0]), "provenance.host", f"calibrations of {len(hosts)} hosts "
                                                            f"({', '.join(sorted(hosts))}): drift needs one host's")
    measured = run_spreads(runs) if runs else {}
    for device in measured:
        if device not in rows:
            raise ConfigError(str(base), f"models.{model}", f"has no device type {device!r}, which the runs used "
                                                            f"(a run of another cluster?)")
    drifts = drift_spreads(base, drift).get(model, {}) if drift else {}
    data = read_toml(base)
    for device, row in data["models"][model].items():
        m = measured.get(device, {})
        if "step_cv_batch" in m:
            row["step_cv_batch"] = {b: round(v, 4) for b, v in sorted(m["step_cv_batch"].items())}
            row["step_cv"] = round(pooled_cv(list(m["step_cv_batch"].values())), 4)
        if "overhead_cv" in m:
            row["overhead_cv"] = round(m["overhead_cv"], 4)
        if device in drifts:
            row["drift_cv"] = round(drifts[device], 4)
    sources = [f"{len(runs)} recorded run(s) ({', '.join(relative_name(r, out) for r in runs)})"] if runs else []
    if drift:
        sources.append(f"{len(drift) + 1} calibrations ({', '.join(relative_name(str(p), out) for p in drift)} "
                       f"and the base)")
    data.setdefault("provenance", {})["spread"] = f"measured by hetune calibrate spread from {' and '.join(sources)}"
    from_mapping(CalibrationConfig, data, str(out))  # a spread the file cannot hold is refused before writing
    atomic_write_toml(out, data, header="Calibration with spreads measured by `hetune calibrate spread`.")
    return {"runs": measured, "drift": drifts}
