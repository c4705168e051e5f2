"""Which device types of a cluster config exist on a Ray cluster, and how a task asks for one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from hetune.sim.cluster import ClusterConfig
from hetune.sim.enums import DeviceKind


@dataclass(frozen=True)
class DeviceTarget:
    """How to run a probe on one device type.

    Args:
        device: device type name from the cluster config.
        kind: the device type's kind (GPU or CPU).
        resources: Ray custom resources the task asks for.
        num_gpus: GPUs the task asks for.
        num_cpus: CPU cores the task asks for (and torch threads on CPU types).
        slowdown: emulated slowdown factor (1 = real device).
        found: whether the Ray cluster has it.
        reason: why it is missing, when it is.
    """

    device: str
    kind: DeviceKind
    resources: dict[str, float]
    num_gpus: float
    num_cpus: int
    slowdown: float
    found: bool
    reason: str = ""


def custom_resource(device: str) -> str:
    """The Ray custom resource naming an emulated or custom device type."""
    return f"device:{device}"


def local_resources(cluster: ClusterConfig) -> dict[str, float]:
    """Custom resources a local Ray instance gets so each declared CPU device type can be targeted."""
    out: dict[str, float] = {}
    for _, g in cluster.node_names():
        if cluster.device_kind(g.device) == DeviceKind.CPU:
            out[custom_resource(g.device)] = out.get(custom_resource(g.device), 0) + g.cpu_workers()
    return out


def discover(cluster: ClusterConfig, ray_nodes: Iterable[Mapping[str, Any]]) -> list[DeviceTarget]:
    """Match the config's device types against the live Ray nodes' resources.

    A GPU type is found on a node with GPUs and ``accelerator_type:<label>`` (or a
    ``device:<name>`` resource); a CPU type on a node with ``device:<name>``, or, when
    the config has a single CPU type, on any node with CPUs and no GPUs.

    Args:
        cluster: the cluster config.
        ray_nodes: ``ray.nodes()`` entries (alive ones are used).
    """
    alive = [n.get("Resources", {}) for n in ray_nodes if n.get("Alive", True)]
    cpu_types = [d for d in cluster.devices if cluster.device_kind(d) == DeviceKind.CPU]
    targets = []
    for device in sorted(cluster.devices):
        spec = cluster.devices[device]
        groups = [g for _, g in cluster.node_names() if g.device == device]
        cores = min(g.worker_size for g in groups) if groups else 1
        custom = custom_resource(device)
        if cluster.device_kind(device) == DeviceKind.GPU:
            label = f"accelerator_type:{spec.accelerator_type}" if spec.accelerator_type else None
            hit_custom = any(r.get(custom, 0) > 0 for r in alive)
            hit_label = label is not None and any(r.get(label, 0) > 0 and r.get("GPU", 0) > 0 for r in alive)
            res = {custom: 1.0} if hit_custom else ({label: 0.001} if hit_label and label else {})
            found = hit_custom or hit_label
            reason = "" if found else (f"no Ray node has GPUs with {label}" if label else f"no Ray node has {custom}")
            targets.append(DeviceTarget(device, DeviceKind.GPU, res, 1.0, 1, spec.emulated_slowdown, found, reason))
        else:
            hit_custom = any(r.get(custom, 0) > 0 for r in alive)
            plain = len(cpu_types) == 1 and any(r.get("CPU", 0) > 0 and not r.get("GPU") for r in alive)
            found = hit_custom or plain
            res = {custom: 1.0} if hit_custom else {}
            ncpu = max((r.get("CPU", 0) for r in alive), default=0)
            targets.append(DeviceTarget(device, DeviceKind.CPU, res, 0.0, int(max(1, min(cores, ncpu or cores))),
                                        spec.emulated_slowdown, found, "" if found else f"no Ray node has {custom}"))
    return targets
