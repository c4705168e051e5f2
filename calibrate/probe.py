"""Time real training steps, an evaluation pass and checkpoint save/load of one model.

Runs inside a Ray task (or directly): builds the model, warms up, then times
forward + backward + SGD-with-momentum steps on CIFAR-shaped batches.
"""

from __future__ import annotations

import io
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from hetune.real.models import build_model


@dataclass
class ProbeResult:
    """Timings of one (model, device, batch) cell, in seconds.

    Args:
        step_times_s: seconds per training step, one per timed step.
        eval_s: seconds for an evaluation pass over ``eval_samples`` samples.
        save_s: seconds to serialise the checkpoint (model + optimizer).
        load_s: seconds to load it back.
        checkpoint_mb: checkpoint size in MB.
        host: host name.
        device_name: torch device description.
        threads: torch CPU threads used.
        build_s: seconds to build the model and optimizer.
        params: trainable parameters of the model (gradient bytes = 4 x params).
    """

    step_times_s: list[float]
    eval_s: float
    save_s: float
    load_s: float
    checkpoint_mb: float
    host: str
    device_name: str
    threads: int
    build_s: float = 0.0
    params: int = 0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_eval(model: Any, batch_at: Any, batch: int, eval_samples: int, dev: Any) -> float:
    """Seconds of one evaluation pass over ``eval_samples`` images in batches of ``batch``."""
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        done = 0
        while done < eval_samples:
            n = min(batch, eval_samples - done)
            x, _ = batch_at(done // max(n, 1), n)
            model(x)
            done += n
    _sync(dev)
    return time.perf_counter() - t0


def _time_save_load(model: Any, opt: Any, dev: Any) -> tuple[float, float, float]:
    """Seconds to save and to load the model and optimizer state (in memory), and its size in MB."""
    buf = io.BytesIO()
    t0 = time.perf_counter()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    save_s = time.perf_counter() - t0
    size_mb = buf.tell() / 1e6
    buf.seek(0)
    t0 = time.perf_counter()
    state = torch.load(buf, map_location=dev)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return save_s, time.perf_counter() - t0, size_mb


def probe(model_name: str, num_classes: int, batch: int, steps: int, warmup: int = 2,
          device: str = "cpu", threads: int = 0, slowdown: float = 1.0, stem: str = "cifar",
          eval_samples: int = 1000, data: tuple[Any, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Time ``steps`` training steps of ``model_name`` at ``batch`` after ``warmup`` steps.

    Args:
        model_name: "resnet18" or "resnet50".
        num_classes: classes of the head.
        batch: samples per step.
        steps: timed steps.
        warmup: untimed steps first.
        device: "cpu" or "cuda".
        threads: torch CPU threads (0 = leave as is).
        slowdown: emulated slowdown factor >= 1: each step sleeps (factor - 1) x its time,
            so an emulated slow device type is slower by exactly this factor.
        stem: "imagenet" or "cifar" (see real.models.build_model).
        eval_samples: samples in the timed evaluation pass.
        data: optional (images uint8 NHWC, labels) real CIFAR arrays; else synthetic batches.
        seed: seed of the synthetic data and the model initialisation.
    """
    if threads > 0:
        torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    dev = torch.device(device)
    t_build = time.perf_counter()
    model = build_model(model_name, num_classes, stem).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    build_s = time.perf_counter() - t_build

    def batch_at(i: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if data is not None:
            images, labels = data
            idx = torch.arange(i * n, (i + 1) * n) % len(labels)
            x = torch.as_tensor(images[idx.numpy()]).permute(0, 3, 1, 2).float().div_(255.0)
            y = torch.as_tensor(labels[idx.numpy()]).long()
        else:
            x = torch.rand(n, 3, 32, 32, generator=gen)
            y = torch.randint(0, num_classes, (n,), generator=gen)
        return x.to(dev), y.to(dev)

    def train_step(i: int) -> None:
        x, y = batch_at(i, batch)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    model.train()
    for i in range(warmup):
        train_step(i)
    _sync(dev)
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        train_step(warmup + i)
        _sync(dev)
        dt = time.perf_counter() - t0
        if slowdown > 1.0:
            time.sleep(dt * (slowdown - 1.0))
            dt *= slowdown
        times.append(dt)
    eval_s = _time_eval(model, batch_at, batch, eval_samples, dev) * slowdown
    save_s, load_s, size_mb = _time_save_load(model, opt, dev)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({os.cpu_count()} cores visible)"
    return asdict(ProbeResult(times, eval_s, save_s, load_s, size_mb, socket.gethostname(), name,
                              torch.get_num_threads(), build_s,
                              sum(p.numel() for p in model.parameters() if p.requires_grad)))
