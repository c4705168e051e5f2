"""Turn calibration samples into the calibration TOML the simulator reads."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict
from typing import Any, Iterable

from hetune.calibrate.fit import LinearFit, fit_step_time
from hetune.sim.throughput import Sample

POOR_R2 = 0.9
POOR_RESIDUAL = 0.15
DEFAULT_PARALLEL_FRACTION = 0.5  # measured for resnet18 on this 2-core host (configs/calibration/reference.toml)


def fit_cells(samples: Iterable[Sample]) -> dict[tuple[str, str], tuple[LinearFit, list[tuple[int, float]]]]:
    """Per (model, device): the fit over non-held-out batch sizes (median over repeats) and its points."""
    by: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if s.ok and not s.heldout:
            by[(s.model, s.device)][s.batch].append(s.step_time_s)
    out = {}
    for key, per_batch in by.items():
        pts = sorted((b, statistics.median(ts)) for b, ts in per_batch.items())
        out[key] = (fit_step_time([b for b, _ in pts], [t for _, t in pts]), pts)
    return out


def step_cvs(samples: Iterable[Sample], model: str, device: str) -> dict[int, float]:
    """The run-to-run spread of one device type's step times per batch size measured at least twice
    (``--repeat``): the relative sample standard deviation of the repeats' means."""
    by: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        if s.ok and s.model == model and s.device == device and s.step_time_s > 0:
            by[s.batch].append(s.step_time_s)
    return {b: statistics.stdev(ts) / statistics.mean(ts) for b, ts in sorted(by.items()) if len(ts) >= 2}


def pooled_cv(cvs: list[float]) -> float:
    """Relative spreads measured on groups of different means pooled into one (root mean square)."""
    return (sum(c * c for c in cvs) / len(cvs)) ** 0.5


def step_cv(samples: Iterable[Sample], model: str, device: str) -> float | None:
    """``step_cvs`` pooled over batch sizes; None where no cell was repeated."""
    cvs = list(step_cvs(samples, model, device).values())
    return pooled_cv(cvs) if cvs else None


def holdout_errors(samples: Iterable[Sample],
                   fits: dict[tuple[str, str], tuple[LinearFit, Any]]) -> list[dict[str, Any]]:
    """Relative error of the fit at every held-out batch size (median over repeats)."""
    by: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for s in samples:
        if s.ok and s.heldout:
            by[(s.model, s.device, s.batch)].append(s.step_time_s)
    out = []
    for (model, device, batch), ts in sorted(by.items()):
        if (model, device) in fits:
            measured = statistics.median(ts)
            predicted = fits[(model, device)][0].predict(batch)
            out.append({"model": model, "device": device, "batch": batch, "measured_s": round(measured, 6),
                        "predicted_s": round(predicted, 6), "error": round((predicted - measured) / measured, 4)})
    return out


def build_file(samples: list[Sample], extras: dict[tuple[str, str], dict[str, float]], provenance: dict[str, Any],
               base: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The calibration file's data and warnings about poor fits.

    Args:
        samples: all samples (failed ones are kept for the record).
        extras: per (model, device): eval_s, checkpoint_mb, save_s, load_s, start_overhead_s,
            reference_cores, parallel_fraction (medians of the measured cells), parallel_fraction_batch.
        provenance: provenance table.
        base: an existing calibration file's data whose models are kept unless re-measured (--merge).
    """
    fits = fit_cells(samples)
    models: dict[str, dict[str, Any]] = {m: dict(d) for m, d in (base or {}).get("models", {}).items()}
    warnings = []
    for (model, device), (fit, pts) in sorted(fits.items()):
        if (model, device) not in extras:
            continue  # not measured in this run (a merged or resumed file's rows and samples): keep as is
        ex = extras.get((model, device), {})
        entry = {"alpha_s": round(fit.alpha_s, 8), "beta_s_per_sample": round(fit.beta_s_per_sample, 10),
                 "r2": round(fit.r2, 4), "source": "measured"}
        entry.update({k: round(v, 6) if isinstance(v, float) else v for k, v in ex.items()})
        cv = step_cv(samples, model, device)
        if cv is not None:
            entry["step_cv"] = round(cv, 4)
            entry["step_cv_batch"] = {str(b): round(c, 4) for b, c in step_cvs(samples, model, device).items()}
        models.setdefault(model, {})[device] = entry
        if len(pts) >= 3 and (fit.r2 < POOR_R2 or fit.max_rel_residual > POOR_RESIDUAL):
            warnings.append(f"poor fit for {model} on {device}: R^2 {fit.r2:.3f}, "
                            f"largest relative residual {fit.max_rel_residual:.1%}")
    measured = {(s.model, s.device) for s in samples}
    kept_samples = [dict(s) for s in (base or {}).get("samples", [])
                    if (s.get("model"), s.get("device")) not in measured]
    prov = dict((base or {}).get("provenance", {}))
    prov.update(provenance)
    errs = holdout_errors(samples, fits)
    if errs:
        prov["holdout_max_abs_error"] = max(abs(e["error"]) for e in errs)
    data = {"provenance": prov, "models": models,
            "samples": kept_samples + [{k: v for k, v in asdict(s).items()} for s in samples]}
    return data, warnings
