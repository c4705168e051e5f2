"""A Ray Tune class trainable that advances a registered learning model instead of training a network.

With ``real.trainable = "model"`` hetune's real path (``validate``, ``validate --plain`` and the
StrategyScheduler) runs PBT populations on known dynamics: the experiment's learning model
(sim/learning.py; the noisy quadratic model by default) stands in for the ResNet. Everything Ray
Tune does is real (actors, pauses, checkpoints through storage, PBT's exploit and explore, the
scheduler's placement); only the learning is the model's. That is what comparing the simulator's
PBT with Ray's own needs: both engines on the same learning dynamics, so that any difference is in
how they run PBT.

Like the network trainable (real/trainable.py) one ``step()`` is one iteration (so
``training_iteration`` counts iterations, as the strategy scheduler and the stoppers assume), it
evaluates at every multiple of ``checkpoint_interval`` and at its last iteration, saves on demand
(``meta.json`` with its save seconds beside the state), and reports the same keys. No torch is
imported. A trial's own stream (``seed`` and its trial index) draws its seed luck and its readings;
a restore continues the stream from the checkpoint's iteration.

Time. ``real.model_sleep`` (a factor, default 1) sleeps each step for that multiple of the
calibrated step time of the device type the trial runs on (and each evaluation for its calibrated
evaluation time), so ``time_total_s`` means device seconds, as Ray's ``time_attr = "time_total_s"``
needs; 0 runs as fast as Ray allows. The calibration of an emulated cluster already holds its
slowdowns, so no emulated slowdown is added on top.
"""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
from ray import tune

from hetune.real.trial_env import maybe_fail, where_am_i
from hetune.sim import learning, plugins
from hetune.sim.enums import DeviceKind

SETUP_KEY = "_hetune"  # the same key as the network trainable's


def learning_setup(inputs: Any) -> dict[str, Any]:
    """What an actor needs to rebuild the experiment's learning model, as plain data.

    Args:
        inputs: the run's RunInputs.
    """
    from hetune.sim.schema import to_mapping

    exp, info = inputs.experiment, inputs.experiment.experiment
    bell = inputs.calibration.curves.get(info.model, exp.surrogate)
    from hetune.sim import plugins

    return {"learning": to_mapping(exp.learning), "bell": to_mapping(bell), "batch_size": info.batch_size,
            "eval_samples": info.eval_samples, "plugins": sorted(plugins.LOADED)}


def device_seconds(inputs: Any, sleep: float) -> dict[str, dict[str, float]]:
    """Per device type, the calibrated seconds of one step (one device) and one evaluation, times ``sleep``."""
    info = inputs.experiment.experiment
    where = inputs.experiment.calibration.path
    step_time = inputs.calibration.step_time_fn(info.model, info.batch_size, inputs.cluster, where)
    out = {}
    for d in sorted({n.device for n in inputs.cluster.nodes}):
        dm = inputs.calibration.device_model(info.model, d, where)
        kind = inputs.cluster.device_kind(d)
        one = 1 if kind == DeviceKind.GPU else max(dm.reference_cores, 1)
        out[d] = {"step_s": sleep * step_time(d, one),
                  "eval_s": sleep * dm.eval_time_s(one, kind) * info.eval_samples / 10_000}
    return out


def build_model(setup: dict[str, Any]) -> Any:
    """The learning model from ``learning_setup``'s data (inside a Ray actor)."""
    from hetune.sim import learning
    from hetune.sim.config import LearningConfig
    from hetune.sim.schema import from_mapping
    from hetune.sim.surrogate import SurrogateParams

    cfg = from_mapping(LearningConfig, setup["learning"], "model trainable setup", "learning")
    bell = from_mapping(SurrogateParams, setup["bell"], "model trainable setup", "surrogate").at_batch(
        setup["batch_size"])
    return learning.create(cfg, bell, setup["batch_size"], setup["eval_samples"])


class ModelTrainable(tune.Trainable):
    """One PBT trial of the experiment's learning model until its iteration or accuracy limit."""

    def setup(self, config: dict[str, Any]) -> None:
        self.s = dict(config[SETUP_KEY], trial_index=config.get("trial_index"))
        self.device_type, self.node, _ = where_am_i({})
        for name in self.s["model_setup"].get("plugins", []):  # shipped by the job's runtime_env (py_modules)
            plugins.load(name, "model trainable", "")
        self.model = build_model(self.s["model_setup"]).for_run(int(self.s["seed"]))
        seconds = self.s.get("device_seconds", {}).get(self.device_type, {})
        self.sleep_step, self.sleep_eval = float(seconds.get("step_s", 0.0)), float(seconds.get("eval_s", 0.0))
        self.rng = np.random.default_rng([int(self.s["seed"]), int(self.s.get("trial_index") or 0)])
        self.state = self.model.initial_state(self.rng)
        self.n, self.accuracy, self.load_s = 0, 0.0, 0.0

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False  # as the network trainable: an exploited trial restarts

    def step(self) -> dict[str, Any]:
        s = self.s
        t0 = time.perf_counter()
        self.state = learning.advance(self.model, self.state, self.config, 1, self.rng)
        if self.sleep_step > 0:
            time.sleep(self.sleep_step)
        step_s = time.perf_counter() - t0
        self.n += 1
        maybe_fail(s, self.n)
        eval_s = 0.0
        if self.n % s["checkpoint_interval"] == 0 or self.n >= s["stop_iterations"]:
            t0 = time.perf_counter()
            self.accuracy = float(self.model.observe(self.state, self.rng))
            if self.sleep_eval > 0:
                time.sleep(self.sleep_eval)
            eval_s = time.perf_counter() - t0
        out = {"step": self.n, "loss": float(getattr(self.state, "loss", 0.0)), "accuracy": self.accuracy,
               "step_s": step_s, "eval_s": eval_s, "load_s": self.load_s, "device": self.device_type,
               "node": self.node, "wall_time": time.time()}
        self.load_s = 0.0
        return out

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        t0 = time.perf_counter()
        with open(Path(checkpoint_dir) / "state.pkl", "wb") as fh:  # numpy arrays and floats: the model's state
            pickle.dump({"state": self.state, "step": self.n, "accuracy": self.accuracy}, fh)
        (Path(checkpoint_dir) / "meta.json").write_text(json.dumps({"save_s": time.perf_counter() - t0,
                                                                     "step": self.n, "wall_time": time.time()}))

    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]  # Ray passes the folder save_checkpoint wrote (its hint says dict)
        t0 = time.perf_counter()
        with open(Path(checkpoint_dir) / "state.pkl", "rb") as fh:
            saved = pickle.load(fh)
        # the donor's model state (luck included); explore's lr and momentum are self.config's
        self.state, self.n, self.accuracy = saved["state"], int(saved["step"]), float(saved["accuracy"])
        self.rng = np.random.default_rng([int(self.s["seed"]), int(self.s.get("trial_index") or 0), self.n])
        self.load_s = time.perf_counter() - t0
