"""The Ray Tune class trainable: a ResNet on CIFAR with SGD, one ``step()`` = one mini-batch.

A class trainable (not a function) because a strategy's chunk may end anywhere: when the
scheduler pauses a trial, Tune calls ``save_checkpoint`` there and then, so no iteration is
redone, as the simulator assumes (a function trainable can only hand Tune the checkpoint it
last reported). Tune also saves every ``checkpoint_interval`` iterations (CheckpointConfig).
Evaluation is defined once for both engines: at every multiple of ``checkpoint_interval`` and at
a trial's last iteration, nowhere else; accuracy in between is the latest evaluation.

Each result carries what the event recorder needs (seconds): step_s, eval_s, load_s (of the
restore before this step), download_s (what that restore took beyond load_s: the checkpoint's
download from Tune's storage), and where the trial runs (device type, node). A save writes
``meta.json`` next to the weights with its own save_s, read by the recorder's on_checkpoint.

A worker of several devices trains data-parallel at the experiment's global batch: on CPU
workers torch uses all the cores Ray assigned to the trial; on a worker of several GPUs the
model is wrapped in ``torch.nn.DataParallel`` (one process splits every batch over the trial's
GPUs: no process group to set up inside an actor, the same loop as the CPU path).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray import tune

from hetune.real.models import build_model
from hetune.real.trial_env import assigned_devices, maybe_fail as _maybe_fail, slow as _slow, where_am_i

SETUP_KEY = "_hetune"  # fixed, non-mutated settings ride in the config under this key


def _data(setup: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from hetune.real.cifar import load_cifar

    xtr, ytr = load_cifar(setup["data_dir"], setup["dataset"], "train", limit=setup.get("train_limit") or None)
    xte, yte = load_cifar(setup["data_dir"], setup["dataset"], "test", limit=setup["eval_samples"])
    return xtr, ytr, xte, yte


def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x).permute(0, 3, 1, 2).float().div_(255.0)


class PBTTrainable(tune.Trainable):
    """One PBT trial until its iteration or accuracy limit (the stopper ends it on either)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.s = dict(config[SETUP_KEY], trial_index=config.get("trial_index"))
        cores, gpus = assigned_devices()
        # A CPU worker of k cores trains on k threads; real.threads is the floor for 1-core slots.
        torch.set_num_threads(max(cores, int(self.s.get("threads", 1))) if gpus == 0 else 1)
        self.device_type, self.node, self.slowdown = where_am_i(self.s.get("slowdowns", {}))
        torch.manual_seed(self.s["seed"])
        self.xtr, self.ytr, self.xte, self.yte = _data(self.s)
        self.dev = torch.device("cuda" if gpus > 0 else "cpu")
        net = build_model(self.s["model"], self.s["num_classes"], self.s.get("stem", "cifar")).to(self.dev)
        self.net = net
        self.model = torch.nn.DataParallel(net) if gpus > 1 else net
        self.opt = torch.optim.SGD(net.parameters(), lr=config["lr"], momentum=config["momentum"])
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.n, self.accuracy, self.load_s = 0, 0.0, 0.0
        self.download_s = 0.0  # the checkpoint's download before this process's restore, not yet reported
        self.rng = np.random.default_rng(self.s["seed"])

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False  # reuse_actors is off: an exploited trial restarts, as the simulator charges

    def step(self) -> dict[str, Any]:
        s = self.s
        t0 = time.perf_counter()
        self.model.train()
        idx = self.rng.integers(0, len(self.ytr), s["batch_size"])
        x = _tensor(self.xtr[idx]).to(self.dev)
        y = torch.as_tensor(self.ytr[idx]).long().to(self.dev)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(x), y)
        if torch.isfinite(loss):  # a diverged trial stops learning instead of crashing
            loss.backward()
            self.opt.step()
        step_s = _slow(time.perf_counter() - t0, self.slowdown)
        self.n += 1
        _maybe_fail(s, self.n)
        eval_s = 0.0
        if self.n % s["checkpoint_interval"] == 0 or self.n >= s["stop_iterations"]:
            t0 = time.perf_counter()
            self.accuracy = evaluate(self.model, self.xte, self.yte, s["batch_size"], self.dev)
            eval_s = _slow(time.perf_counter() - t0, self.slowdown)
        out = {"step": self.n, "loss": float(loss), "accuracy": self.accuracy, "step_s": step_s, "eval_s": eval_s,
               "load_s": self.load_s, "device": self.device_type, "node": self.node, "wall_time": time.time(),
               "download_s": self.download_s}
        self.load_s = self.download_s = 0.0
        return out

    def restore(self, checkpoint_path: Any) -> Any:
        # Tune's restore: from an object store the checkpoint is downloaded first (Checkpoint.as_directory),
        # from a file system read in place; what is not load_checkpoint's own is the download.
        t0 = time.perf_counter()
        out = super().restore(checkpoint_path)
        self.download_s = max(0.0, time.perf_counter() - t0 - self.load_s)
        return out

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        t0 = time.perf_counter()
        torch.save({"model": self.net.state_dict(), "opt": self.opt.state_dict(), "step": self.n,
                    "accuracy": self.accuracy}, Path(checkpoint_dir) / "state.pt")
        save_s = time.perf_counter() - t0
        (Path(checkpoint_dir) / "meta.json").write_text(json.dumps({"save_s": save_s, "step": self.n,
                                                                     "wall_time": time.time()}))

    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]  # Ray passes the folder save_checkpoint wrote (its hint says dict)
        t0 = time.perf_counter()
        state = torch.load(Path(checkpoint_dir) / "state.pt", weights_only=False, map_location=self.dev)
        self.net.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.n, self.accuracy = int(state["step"]), float(state["accuracy"])
        for group in self.opt.param_groups:  # explore changed the config: the donor's optimizer state, our lr/momentum
            group["lr"], group["momentum"] = self.config["lr"], self.config["momentum"]
        self.rng = np.random.default_rng(self.s["seed"] + self.n)
        self.load_s = time.perf_counter() - t0


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: np.ndarray, y: np.ndarray, batch: int,
             device: torch.device | None = None) -> float:
    """Top-1 accuracy on (x, y)."""
    model.eval()
    correct = 0
    for i in range(0, len(y), batch):
        xb = _tensor(x[i:i + batch])
        pred = model(xb if device is None else xb.to(device)).argmax(1).cpu()
        correct += int((pred == torch.as_tensor(y[i:i + batch])).sum())
    return correct / max(1, len(y))
