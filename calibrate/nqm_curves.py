"""``hetune calibrate curves --kind nqm``: read recorded runs, fit the noisy quadratic model, write it.

Inputs, any mix of: hetune run folders or their events.jsonl (simulated or real; the batch from the
folder's config.toml), and Ray Tune experiment folders (calibrate/tune_folder.py). The output is a
learning file an experiment names with ``[learning] path = "..."`` (or ``--set learning.path=...``):
``[learning.nqm]`` holds the parameters, ``[fit]`` what the data identified, each parameter's 95%
interval and its prior, so that the file says how far to trust it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetune.calibrate.curves import relative_name
from hetune.calibrate.histories import History, from_events
from hetune.calibrate.nqm_fit import FITTED, LOSS_TERMS, fit_nqm
from hetune.calibrate.tune_folder import is_tune_folder, read_tune_folder
from hetune.sim.errors import ConfigError
from hetune.sim.events import read_events
from hetune.sim.nqm import NQMParams
from hetune.sim.loader import load_learning_file
from hetune.sim.schema import to_mapping
from hetune.sim.tomlfile import atomic_write_toml, read_toml


def read_histories(paths: list[str], metric: str, loss_metric: str, batch: int | None,
                   momentum: float | None, scale: float = 1.0) -> list[History]:
    """Every trial history of the named runs (see the module docstring for what each may be); a reading that
    is not an accuracy in [0, 1] once divided by ``scale`` is refused, since the learning models predict an
    accuracy and one fitted to another metric predicts nonsense."""
    out: list[History] = []
    for i, p in enumerate(paths):
        path = Path(p)
        if not path.exists():
            raise ConfigError(p, "", "no such file or folder")
        if is_tune_folder(path):
            out += read_tune_folder(path, f"run{i}", metric, loss_metric, batch, momentum)
            continue
        folder = path if path.is_dir() else path.parent
        events = path / "events.jsonl" if path.is_dir() else path
        if not events.is_file():
            raise ConfigError(p, "", "neither a Ray Tune experiment folder (trial folders with result.json) nor a "
                                     "run folder with events.jsonl")
        b = batch
        if (folder / "config.toml").is_file():
            b = int(read_toml(folder / "config.toml").get("experiment", {}).get("batch_size", 0)) or batch
        if not b:
            raise ConfigError(p, "", "no config.toml beside these events names the batch size: pass --batch-size")
        out += from_events(read_events(events), f"run{i}", b, str(events), momentum)
    for h in out:
        bad = next((r for r in h.readings() if r.accuracy is not None and not 0.0 <= r.accuracy / scale <= 1.0), None)
        if bad is not None and bad.accuracy is not None:
            raise ConfigError(h.source, "", f"trial {h.key}: reading {bad.accuracy / scale:g} of {metric!r} at "
                                            f"iteration {bad.iteration} is not an accuracy in [0, 1] (the learning "
                                            "models predict an accuracy; --kind skills takes --accuracy-scale)")
    return out


def write_fit(paths: list[str], out: Path, prior: NQMParams, eval_samples: int, metric: str = "accuracy",
              loss_metric: str = "loss", batch: int | None = None, momentum: float | None = None,
              use_loss: bool = True) -> dict[str, Any]:
    """Fit the runs and write the learning file ``out`` (nothing is written if reading or fitting fails).

    Args:
        paths: the recorded runs.
        out: the learning file to write.
        prior: the experiment's NQM parameters: start and the value of what the data do not identify.
        eval_samples: test images per evaluation in the runs.
        metric, loss_metric: result keys of Ray Tune folders.
        batch, momentum: where the runs do not record them.
        use_loss: fit training losses where recorded.
    """
    histories = read_histories(paths, metric, loss_metric, batch, momentum)
    fit = fit_nqm(histories, prior, eval_samples, use_loss=use_loss)
    table = {n: {k: v for k, v in row.items() if v is not None} for n, row in fit["table"].items()}
    design = fit["design"]
    data = {"learning": {"nqm": to_mapping(fit["params"])},
            "fit": {"sources": [relative_name(p, out) for p in paths], "trials": design["trials"],
                    "accuracy_readings": design["accuracies"], "loss_readings": design["losses"],
                    "learning_rates": design["lrs"], "batches": design["batches"],
                    "trials_whose_lr_changed": design["lr_changes"], "accuracy_rmse": round(fit["rmse"], 6),
                    "noise_std_and_seed_std": "moment estimates from the residuals (no interval)",
                    "intervals": "95% profile likelihood; identified = closed and within x10 (max_accuracy 0.2)",
                    "lag1": fit["lag1"], "inflation": fit["inflation"],  # the residuals' serial correlation
                    **({"loss_map": {"floor": fit["loss_map"][0], "scale": fit["loss_map"][1]}}
                       if fit["loss_map"] else {}),
                    "parameters": table}}
    atomic_write_toml(out, data, header=(
        "The noisy quadratic model fitted to recorded runs (`hetune calibrate curves --kind nqm`).\n"
        "Name it from an experiment: [learning] path = \"<this file>\"; [fit] says what the data identified."))
    load_learning_file(out)  # what was written reads back
    return fit


def describe(fit: dict[str, Any]) -> list[str]:
    """One line per parameter: estimate, interval, identified or kept at the prior."""
    lines = []
    for n in (*FITTED, *LOSS_TERMS):
        row = fit["table"].get(n)
        if row is None:
            continue
        if row["identified"]:
            lines.append(f"{n}: {row['estimate']:.4g} (95% {row['low']:.4g} .. {row['high']:.4g})")
        else:
            lines.append(f"{n}: not identified by these runs, kept at the prior {row['prior']}"
                         if row.get("prior") is not None else f"{n}: not identified")
    lines.append(f"noise_std {fit['noise_std']:.4f}, seed_std {fit['seed_std']:.4f} (moment estimates); "
                 f"accuracy RMSE {fit['rmse']:.4f} over {fit['readings']} readings")
    return lines
