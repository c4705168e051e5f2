"""The Ray Tune function trainable: a torchvision ResNet on CIFAR with SGD, one iteration = one mini-batch.

Reports every iteration (accuracy is the latest evaluation, refreshed at
every checkpoint interval, where PBT looks at it), saves a checkpoint every
``checkpoint_interval`` iterations and restores from ``tune.get_checkpoint()``,
so an exploited trial really continues from its donor's weights and step.
Each report also carries the timings the event recorder needs (seconds):
step_s, eval_s, save_s, load_s, and where the trial runs (device type, node).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray import tune

from hetune.real.models import build_model

SETUP_KEY = "_hetune"  # fixed, non-mutated settings ride in the config under this key


def where_am_i(slowdowns: dict[str, float]) -> tuple[str, str, float]:
    """(device type, node name, slowdown) of the node this trial runs on, from its Ray resources."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    res: dict[str, float] = {}
    for n in ray.nodes():
        if n["NodeID"] == node_id:
            res = n["Resources"]
    device = next((k.split(":", 1)[1] for k in sorted(res) if k.startswith("device:")), "")
    if not device:
        acc = next((k.split(":", 1)[1] for k in sorted(res) if k.startswith("accelerator_type:")), "")
        device = acc.lower() if acc else ("gpu" if res.get("GPU") else "cpu")
    node = next((k.split(":", 1)[1] for k in sorted(res) if k.startswith("hetune-node:")), os.uname().nodename)
    return device, node, float(slowdowns.get(device, 1.0))


def _data(setup: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from hetune.real.cifar import load_cifar

    xtr, ytr = load_cifar(setup["data_dir"], setup["dataset"], "train", limit=setup.get("train_limit") or None)
    xte, yte = load_cifar(setup["data_dir"], setup["dataset"], "test", limit=setup["eval_samples"])
    return xtr, ytr, xte, yte


def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x).permute(0, 3, 1, 2).float().div_(255.0)


def train_trial(config: dict[str, Any]) -> None:
    """Train one PBT trial until its iteration or accuracy limit (Ray Tune function trainable)."""
    setup = dict(config[SETUP_KEY], trial_index=config.get("trial_index"))
    torch.set_num_threads(max(1, int(setup.get("threads", 1))))
    device, node, slowdown = where_am_i(setup.get("slowdowns", {}))
    torch.manual_seed(setup["seed"])
    xtr, ytr, xte, yte = _data(setup)
    model = build_model(setup["model"], setup["num_classes"], setup.get("stem", "cifar"))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    loss_fn = torch.nn.CrossEntropyLoss()
    step, accuracy, load_s = 0, 0.0, 0.0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        t0 = time.perf_counter()
        with ckpt.as_directory() as d:
            state = torch.load(Path(d) / "state.pt", weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, accuracy = int(state["step"]), float(state["accuracy"])
        load_s = time.perf_counter() - t0
    for group in opt.param_groups:  # explore changed the config: the donor's optimizer state, our lr/momentum
        group["lr"], group["momentum"] = config["lr"], config["momentum"]
    batch, interval = setup["batch_size"], setup["checkpoint_interval"]
    rng = np.random.default_rng(setup["seed"] + step)
    while step < setup["stop_iterations"] and accuracy < setup["target_accuracy"]:
        t0 = time.perf_counter()
        model.train()
        idx = rng.integers(0, len(ytr), batch)
        x, y = _tensor(xtr[idx]), torch.as_tensor(ytr[idx]).long()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        if torch.isfinite(loss):  # a diverged trial stops learning instead of crashing
            loss.backward()
            opt.step()
        step_s = _slow(time.perf_counter() - t0, slowdown)
        step += 1
        _maybe_fail(setup, step)
        metrics = {"step": step, "loss": float(loss), "step_s": step_s, "eval_s": 0.0, "save_s": 0.0,
                   "load_s": load_s, "device": device, "node": node}
        load_s = 0.0
        if step % interval == 0 or step >= setup["stop_iterations"]:
            t0 = time.perf_counter()
            accuracy = evaluate(model, xte, yte, batch)
            metrics["eval_s"] = _slow(time.perf_counter() - t0, slowdown)
            with tempfile.TemporaryDirectory(prefix="hetune-ckpt-") as tmp:  # Tune persists it on report
                t0 = time.perf_counter()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                            "accuracy": accuracy}, Path(tmp) / "state.pt")
                metrics["save_s"] = time.perf_counter() - t0
                tune.report(dict(metrics, accuracy=accuracy, wall_time=time.time()),
                            checkpoint=tune.Checkpoint.from_directory(tmp))
        else:
            tune.report(dict(metrics, accuracy=accuracy, wall_time=time.time()))


def _maybe_fail(setup: dict[str, Any], step: int) -> None:
    """Fault injection (tests): the trial's process dies once when it reaches the configured step."""
    at = int(setup.get("fail_once_at_step", 0))
    if at and step == at:
        marker = Path(setup["fault_dir"]) / f"failed-{os.getpid()}-{step}"
        done = Path(setup["fault_dir"]) / f"failed-once-{setup.get('trial_index', 'x')}"
        if not done.exists():
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(str(step))
            marker.write_text("")
            os._exit(1)  # a killed worker process, not a Python exception


def _slow(seconds: float, slowdown: float) -> float:
    """Emulated slow device type: sleep so the work took ``slowdown`` times as long."""
    if slowdown > 1.0:
        time.sleep(seconds * (slowdown - 1.0))
    return seconds * slowdown


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: np.ndarray, y: np.ndarray, batch: int) -> float:
    """Top-1 accuracy on (x, y)."""
    model.eval()
    correct = 0
    for i in range(0, len(y), batch):
        pred = model(_tensor(x[i:i + batch])).argmax(1)
        correct += int((pred == torch.as_tensor(y[i:i + batch])).sum())
    return correct / max(1, len(y))
