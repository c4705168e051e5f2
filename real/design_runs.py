"""The runs of a learning-curve design (calibrate/curve_design.py), trained for real as Ray tasks.

Each run trains the experiment's network (real/models.py) from a fresh start with PyTorch SGD at its lr
segments, on the experiment's data at its batch, one torch thread, and reads test accuracy on
``eval_samples`` test images every ``every`` iterations; the mini-batches come from the run's seed, so
the runs of one seed share their data order. A finished run is written whole to ``runs/<name>.json``
(readings: iteration, accuracy, mean training loss over the interval's last quarter, rounded up: the last
13 of 50 iterations, as in bench/bench_digits.py's committed runs); a run already there is not trained
again, so an interrupted design resumes.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from hetune.sim.errors import ConfigError



def train_run(design: dict[str, Any], run: dict[str, Any], data: str) -> dict[str, Any]:
    """One design run (plain data in, so that a Ray task can carry it); returns its record."""
    import numpy as np
    import torch

    from hetune.real.cifar import load_cifar
    from hetune.real.models import build_model
    from hetune.real.trainable import _tensor, evaluate

    torch.set_num_threads(1)
    xtr, ytr = load_cifar(data, design["dataset"], "train")
    xte, yte = load_cifar(data, design["dataset"], "test", limit=design["eval_samples"])
    seed, batch, every = int(run["seed"]), int(design["batch"]), int(design["every"])
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    classes = 100 if design["dataset"] == "cifar100" else 10
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # the GPU a task was given, if any
    net = build_model(design["model"], classes, design["stem"]).to(dev)
    segs = [tuple(s) for s in run["segments"]]
    opt = torch.optim.SGD(net.parameters(), lr=segs[0][0], momentum=segs[0][1])
    loss_fn = torch.nn.CrossEntropyLoss()
    readings, losses, t0 = [], [], time.perf_counter()
    for it in range(1, int(design["horizon"]) + 1):
        lr, m, _ = next((s for s in segs if s[2] >= it), segs[-1])
        for g in opt.param_groups:
            g["lr"], g["momentum"] = lr, m
        net.train()
        idx = rng.integers(0, len(ytr), batch)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(_tensor(xtr[idx]).to(dev)), torch.as_tensor(ytr[idx]).to(dev))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if it % every == 0 or it == design["horizon"]:
            acc = evaluate(net, xte, yte, 100, dev)
            readings.append((it, round(acc, 4), round(float(np.mean(losses[-math.ceil(every / 4):])), 4)))
    return {"name": run["name"], "seed": seed, "segments": run["segments"], "readings": readings,
            "seconds": round(time.perf_counter() - t0, 1)}


def run_design(folder: Path, spec: dict[str, Any], todo: list[dict[str, Any]], data: str, workers: int,
               address: str = "", quiet: bool = False, gpus: float = 0.0) -> int:
    """Train the design runs ``todo`` (each {name, seed, segments}; ``spec`` what every run trains: model,
    dataset, stem, batch, horizon, every, eval_samples) as Ray tasks, ``workers`` at once on a new local
    Ray or on the cluster at ``address`` (each task asking for ``gpus`` GPUs: 1 where the experiment's
    cluster has GPU nodes), each written to ``folder/runs/<name>.json`` as it finishes; returns how many
    were trained."""
    from hetune.real.ray_init import init_ray

    if not todo:
        return 0
    # "local": a new instance of our own, even beside another Ray on this host
    ray = init_ray(address or "local", own=not address, **({} if address else {"num_cpus": workers}))
    try:
        if gpus and ray.cluster_resources().get("GPU", 0) < gpus:  # a task asking for one would wait forever
            raise ConfigError("--address", "", "the experiment's cluster has GPU nodes but this Ray has no GPU: "
                                               "run the design on a Ray cluster with them (--address)")
        task = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(train_run)
        pending = {task.remote(spec, r, data): r for r in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            run = pending.pop(ready[0])
            rec = ray.get(ready[0])
            path = folder / "runs" / f"{run['name']}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(rec) + "\n")
            tmp.replace(path)  # whole or absent: a killed design resumes from the runs written
            if not quiet:
                print(f"{run['name']}: {[a for _, a, _ in rec['readings']]} ({rec['seconds']} s)", file=sys.stderr,
                      flush=True)
    finally:
        ray.shutdown()
    return len(todo)
