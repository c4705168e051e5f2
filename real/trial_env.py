"""Where a Ray Tune trial runs and how it is slowed or failed on purpose: shared by the network
trainable (real/trainable.py) and the model trainable (real/model_trainable.py), without torch."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


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


def assigned_devices() -> tuple[int, int]:
    """(cores, GPUs) Ray assigned to this trial's actor (cores at least 1)."""
    import ray

    res = ray.get_runtime_context().get_assigned_resources()
    return max(1, int(res.get("CPU", 1))), int(res.get("GPU", 0))


def maybe_fail(setup: dict[str, Any], step: int) -> None:
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


def slow(seconds: float, slowdown: float) -> float:
    """Emulated slow device type: sleep so the work took ``slowdown`` times as long."""
    if slowdown > 1.0:
        time.sleep(seconds * (slowdown - 1.0))
    return seconds * slowdown
