"""Background load for ``hetune calibrate --under-load``: the other worker slots of an emulated
cluster train while a cell is timed.

The emulated device types of a one-host cluster share its cores: in a real run every worker trains
at once, so a step takes longer than the same step timed alone (on the 2-core build host the
fidelity benchmark measured real steps 12-28% slower than an idle calibration). Under load, each
cell is timed while every slot the cell does not use runs the same training loop at its own
device type's slowdown and threads, which is the state of a real run with every worker busy. On a
cluster of separate machines this is not wanted (their devices do not share cores), so it is only
offered for a local, emulated cluster.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from hetune.sim.cluster import ClusterConfig
from hetune.sim.enums import DeviceKind

READY_TIMEOUT_S = 120.0  # model build and first step of every load task
MAX_LOAD_S = 1800.0  # a load task ends by itself after this, whatever happens to the calibration


def load_slots(cluster: ClusterConfig, device: str, cores: int) -> list[tuple[str, int, float]]:
    """(device type, threads, slowdown) of every CPU worker slot a cell on ``device`` with ``cores``
    cores leaves free: the default carving of every node, less the cell's cores on the first node
    of its type.

    Args:
        cluster: the emulated cluster.
        device: the cell's device type.
        cores: cores the cell trains on.
    """
    out: list[tuple[str, int, float]] = []
    taken = False
    for _, g in cluster.node_names():
        if cluster.device_kind(g.device) != DeviceKind.CPU:
            continue
        slowdown = cluster.devices[g.device].emulated_slowdown
        free = g.cpus
        if g.device == device and not taken:
            free -= cores
            taken = True
        size = g.worker_size
        out.extend((g.device, size, slowdown) for _ in range(max(0, free) // size))
    return out


def _load_task(model: str, classes: int, batch: int, threads: int, slowdown: float, stem: str,
               ready: str, stop: str, seed: int) -> int:
    """Train ``model`` on synthetic batches until ``stop`` exists; returns the steps done."""
    import torch

    from hetune.real.models import build_model

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    net = build_model(model, classes, stem)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    t_end = time.monotonic() + MAX_LOAD_S
    steps = 0
    while not Path(stop).exists() and time.monotonic() < t_end:
        t0 = time.perf_counter()
        x, y = torch.rand(batch, 3, 32, 32), torch.randint(0, classes, (batch,))
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        if slowdown > 1.0:  # as the trainable and the probe emulate a slow device type
            time.sleep((time.perf_counter() - t0) * (slowdown - 1.0))
        steps += 1
        if steps == 1:
            Path(ready).touch()
    return steps


class Load:
    """Context: the load tasks of ``slots`` run (Ray tasks with no CPU claim: the emulated cluster
    oversubscribes this host's cores on purpose, as a real run of it does) from entry until exit.

    Args:
        ray: the ray module (initialised).
        slots: from ``load_slots``.
        model, classes, batch, stem: what each load task trains.
    """

    def __init__(self, ray: Any, slots: list[tuple[str, int, float]], model: str, classes: int, batch: int,
                 stem: str) -> None:
        self.ray, self.slots = ray, slots
        self.args = (model, classes, batch, stem)

    def __enter__(self) -> "Load":
        self._dir = tempfile.TemporaryDirectory(prefix="hetune-load-")
        d = Path(self._dir.name)
        self.stop = d / "stop"
        model, classes, batch, stem = self.args
        task = self.ray.remote(num_cpus=0, max_retries=0)(_load_task)
        self.refs = [task.remote(model, classes, batch, threads, slowdown, stem, str(d / f"ready-{i}"),
                                 str(self.stop), i) for i, (_, threads, slowdown) in enumerate(self.slots)]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not all((d / f"ready-{i}").exists() for i in range(len(self.refs))):
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.touch()
        try:
            self.ray.get(self.refs, timeout=READY_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a load task that died or hangs must not fail the calibration
            for r in self.refs:
                self.ray.cancel(r, force=True)
        self._dir.cleanup()
