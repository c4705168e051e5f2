"""What a Ray Tune trial pays besides training, measured on one device type: the probe behind the
start_overhead_s, resume_s, save_s and load_s that the simulator charges.

One short Tune run per (model, device type): one trial of the real trainable
(real/trainable.py) on one slot of that type starts, trains a few iterations and
is paused twice at iterations that are not checkpoint intervals, so the class
trainable saves on demand (as at a strategy's chunk end), then restarts from
its checkpoint each time, as a paused or exploited trial does in a real run
(reuse_actors is off). From its results and saves (seconds):

- start_s: ``Tuner.fit()`` called to the first iteration's work starting (Tune's
  set-up, actor and process start, imports, data, model build). A real run's
  clock starts at the same point (real/validate.py);
- resume_s: a pause's save ending to the next iteration's work starting, less
  the restore itself (actor teardown and start, imports, data, model build);
- save_s, load_s: as the trainable timed them.
"""

from __future__ import annotations

import contextlib
import io
import logging
import statistics
import tempfile
import time
from typing import Any, Iterator

PAUSE_AT = (3, 5)  # iterations where the probe pauses the trial (saves there: not checkpoint intervals)
STOP = 6
CHECKPOINT_INTERVAL = 4


def measure_overheads(model: str, num_classes: int, dataset: str, batch: int, target: Any, stem: str,
                      seed: int = 0) -> dict[str, float]:
    """Run the probe on ``target`` (a real.discovery.DeviceTarget) in the connected Ray; return seconds.

    Args:
        model: "resnet18" or "resnet50".
        num_classes: classes of the head.
        dataset: "cifar10" or "cifar100" (synthetic data of that format).
        batch: samples per iteration.
        target: the device type's Ray resources, cores, GPUs and emulated slowdown.
        stem: the network ("cifar" or "imagenet").
        seed: seed of the data and the model.
    """
    from ray import tune
    from ray.tune import Callback
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler

    from hetune.real.cifar import write_synthetic
    from hetune.real.trainable import SETUP_KEY, PBTTrainable

    class PauseAt(FIFOScheduler):
        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
            return TrialScheduler.PAUSE if result.get("step") in PAUSE_AT else TrialScheduler.CONTINUE

    class Timeline(Callback):
        def __init__(self) -> None:
            self.results: list[dict[str, Any]] = []
            self.saves: list[dict[str, Any]] = []

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
            self.results.append(dict(result))

        def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
            import json
            from pathlib import Path
            try:
                self.saves.append(json.loads((Path(str(checkpoint.path)) / "meta.json").read_text()))
            except (OSError, ValueError):
                pass

    with tempfile.TemporaryDirectory(prefix="hetune-overheads-") as tmp:
        data = write_synthetic(f"{tmp}/data", dataset, train=max(256, batch), test=64, seed=seed)
        setup = {"model": model, "dataset": dataset, "num_classes": num_classes, "batch_size": batch,
                 "stop_iterations": STOP, "target_accuracy": 2.0, "checkpoint_interval": CHECKPOINT_INTERVAL,
                 "data_dir": str(data), "eval_samples": 64, "stem": stem, "threads": max(1, int(target.num_cpus)),
                 "slowdowns": {target.device: target.slowdown}, "seed": seed}
        resources = {"cpu": max(1, int(target.num_cpus)), "gpu": target.num_gpus, **target.resources}
        timeline = Timeline()
        tuner = tune.Tuner(
            tune.with_resources(PBTTrainable, resources),
            param_space={"lr": 0.01, "momentum": 0.9, "trial_index": 0, SETUP_KEY: setup},
            tune_config=tune.TuneConfig(scheduler=PauseAt(), num_samples=1, reuse_actors=False),
            run_config=tune.RunConfig(name="overheads", storage_path=f"{tmp}/tune", verbose=0,
                                      stop={"training_iteration": STOP}, callbacks=[timeline],
                                      checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=CHECKPOINT_INTERVAL)))
        t0 = time.time()
        # Tune prints where its results are and warns about files of the run just deleted: not ours to show
        with contextlib.redirect_stdout(io.StringIO()), _quiet("ray.tune", "ray.train"):
            tuner.fit()
    return summarise(t0, timeline.results, timeline.saves)


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Raise the named loggers to ERROR for the block."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def summarise(t0: float, results: list[dict[str, Any]], saves: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of start, resume, save and load from the probe's results and saves (wall clock, seconds).

    Args:
        t0: when ``Tuner.fit()`` was called.
        results: every result, in order ("step", "wall_time", "step_s", "eval_s", "load_s").
        saves: every save's meta ("step", "wall_time", "save_s").
    """
    by_step = {int(r["step"]): r for r in results}
    if 1 not in by_step or any(k + 1 not in by_step for k in PAUSE_AT):
        raise RuntimeError(f"the overhead probe reported steps {sorted(by_step)}, not 1..{STOP}")

    def work_start(r: dict[str, Any]) -> float:
        return float(r["wall_time"]) - float(r["step_s"]) - float(r["eval_s"])

    resumes, loads = [], []
    for k in PAUSE_AT:
        save = max((s for s in saves if int(s["step"]) == k), key=lambda s: float(s["wall_time"]), default=None)
        if save is None:
            raise RuntimeError(f"the overhead probe's trial did not save at its pause at iteration {k}")
        after = by_step[k + 1]
        loads.append(float(after["load_s"]))
        resumes.append(max(0.0, work_start(after) - float(save["wall_time"]) - float(after["load_s"])))
    return {"start_overhead_s": max(0.0, work_start(by_step[1]) - t0),
            "resume_s": statistics.median(resumes),
            "save_s": statistics.median(float(s["save_s"]) for s in saves),
            "load_s": statistics.median(loads)}
