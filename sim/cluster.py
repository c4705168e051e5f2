"""Cluster description (nodes, device types, network) and the workers carved from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterator

from hetune.sim.enums import DeviceKind
from hetune.sim.schema import from_mapping
from hetune.sim.tomlfile import read_toml


@dataclass(frozen=True)
class DeviceType:
    """One kind of device.

    Args:
        kind: DeviceKind.GPU ("gpu" in the file: a worker holds whole GPUs) or DeviceKind.CPU ("cpu": a
            worker holds cores).
        price_per_hour: cost of one device (one GPU, or one CPU core) for one hour, in dollars.
        accelerator_type: Ray's accelerator_type label for GPUs (e.g. "V100"); "" for none.
        emulated_slowdown: for device types emulated on one machine, the factor by which
            real runs are slowed down on purpose (1.0 = not emulated).
        link_gbps: GPU types: the interconnect between the GPUs of one node of this type, Gb/s
            (data-parallel gradient all-reduce); 0 = not given.
    """

    kind: DeviceKind
    price_per_hour: float = 0.0
    accelerator_type: str = ""
    emulated_slowdown: float = 1.0
    link_gbps: float = 0.0

    def check(self) -> Iterator[tuple[str, str]]:
        if self.price_per_hour < 0:
            yield "price_per_hour", f"must be >= 0, got {self.price_per_hour}"
        if self.link_gbps < 0:
            yield "link_gbps", f"must be >= 0, got {self.link_gbps}"
        if self.emulated_slowdown < 1.0:
            yield "emulated_slowdown", f"must be >= 1, got {self.emulated_slowdown}"


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes.

    Args:
        name: node name prefix; nodes are named name-0, name-1, ... when count > 1.
        device: device type key in [devices].
        count: number of identical nodes.
        cpus: CPU cores per node.
        gpus: GPUs per node (0 for CPU nodes).
        worker_cpus: cores per worker when a CPU node is carved by default; 0 = whole node.
    """

    name: str
    device: str
    count: int = 1
    cpus: int = 1
    gpus: int = 0
    worker_cpus: int = 0

    def check(self) -> Iterator[tuple[str, str]]:
        if self.count < 1:
            yield "count", f"must be >= 1, got {self.count}"
        if self.cpus < 1:
            yield "cpus", f"must be >= 1, got {self.cpus}"
        if self.gpus < 0:
            yield "gpus", f"must be >= 0, got {self.gpus}"
        if self.worker_cpus < 0 or self.worker_cpus > self.cpus:
            yield "worker_cpus", f"must be in [0, cpus={self.cpus}], got {self.worker_cpus}"

    @property
    def worker_size(self) -> int:
        """Cores per worker when this CPU node is carved by default: ``worker_cpus``, or the whole node."""
        return self.worker_cpus or self.cpus

    def cpu_workers(self, size: int = 0) -> int:
        """How many CPU workers of ``size`` cores (default :attr:`worker_size`) fit on one node (0 if none does)."""
        return self.cpus // (size or self.worker_size)


@dataclass(frozen=True)
class ClusterInfo:
    """Cluster-wide settings.

    Args:
        name: cluster name.
        network_gbps: bandwidth between nodes for checkpoint copies, in Gbit/s.
    """

    name: str
    network_gbps: float = 10.0

    def check(self) -> Iterator[tuple[str, str]]:
        if self.network_gbps <= 0:
            yield "network_gbps", f"must be > 0, got {self.network_gbps}"


@dataclass(frozen=True)
class ClusterConfig:
    """A cluster file: [cluster], [devices.<type>], [[nodes]].

    Args:
        cluster: the cluster's name and network.
        devices: device types by name: what each node group's devices are.
        nodes: node groups (``[[nodes]]``), each of one device type.
        description: one line saying what the cluster is, for people reading the file (``hetune cluster
            describe`` writes one).
    """

    cluster: ClusterInfo
    devices: dict[str, DeviceType]
    nodes: tuple[NodeGroup, ...]
    description: str = ""

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.nodes:
            yield "nodes", "must list at least one node"
        seen: set[str] = set()
        for i, n in enumerate(self.nodes):
            if n.device not in self.devices:
                yield (f"nodes[{i}].device",
                       f"unknown device type {n.device!r} (declared: {', '.join(sorted(self.devices))})")
            elif (gpu := self.device_kind(n.device) is DeviceKind.GPU) and n.gpus < 1:
                yield f"nodes[{i}].gpus", f"a node of GPU type {n.device!r} needs gpus >= 1"
            elif gpu and n.gpus > 1 and self.devices[n.device].link_gbps <= 0:
                # a data-parallel worker on several GPUs all-reduces its gradients over this link
                yield f"devices.{n.device}.link_gbps", (f"needed for node {n.name!r} with {n.gpus} GPUs "
                                                         "(the GPU interconnect, Gb/s; e.g. 100 for PCIe 3.0 x16)")
            if n.name in seen:
                yield f"nodes[{i}].name", f"duplicate node name {n.name!r}"
            seen.add(n.name)

    def node_names(self) -> list[tuple[str, NodeGroup]]:
        """Expand node groups into (node name, group) pairs, in file order."""
        out = []
        for g in self.nodes:
            for i in range(g.count):
                out.append((g.name if g.count == 1 else f"{g.name}-{i}", g))
        return out

    def device_kind(self, device: str) -> DeviceKind:
        """The kind of device type ``device`` (a key of [devices]): the one lookup both engines use.

        A DeviceType built in code with the plain string "gpu" or "cpu" gives the member too.
        """
        return DeviceKind(self.devices[device].kind)

    def has_kind(self, kind: DeviceKind) -> bool:
        """Whether any node of the cluster has devices of ``kind``."""
        return any(self.device_kind(g.device) is kind for g in self.nodes)


@dataclass(frozen=True)
class WorkerSpec:
    """A worker: a slice of one node that runs one trial at a time.

    Args:
        node: node name.
        device: device type.
        devices: number of devices it holds (GPUs for GPU types, cores for CPU types).
    """

    node: str
    device: str
    devices: int


CoresFn = Callable[[str, NodeGroup], int]


def carve_workers(cluster: ClusterConfig, *, gpus: int = 1, cores: CoresFn | None = None,
                  kinds: Collection[DeviceKind] = (DeviceKind.GPU, DeviceKind.CPU)) -> list[WorkerSpec]:
    """Cut every node into workers, in node order: the one carving both engines and every strategy use.

    A GPU node gives floor(its GPUs / ``gpus``) workers of ``gpus`` GPUs each; a CPU node gives
    floor(its cores / size) workers of ``size`` cores each.

    Args:
        cluster: the cluster.
        gpus: GPUs per worker on GPU nodes, >= 1.
        cores: (node name, its group) -> cores per worker on a CPU node, >= 1; default the
            group's ``worker_size`` (``worker_cpus``, or the whole node).
        kinds: only nodes of these device kinds give workers (Ray Tune's fixed trial resources
            leave the other kind's nodes unused).
    """
    out: list[WorkerSpec] = []
    for name, g in cluster.node_names():
        kind = cluster.device_kind(g.device)
        if kind not in kinds:
            continue
        if kind is DeviceKind.GPU:
            out.extend(WorkerSpec(name, g.device, gpus) for _ in range(g.gpus // gpus))
        else:
            size = cores(name, g) if cores is not None else g.worker_size
            out.extend(WorkerSpec(name, g.device, size) for _ in range(g.cpu_workers(size)))
    return out


def default_workers(cluster: ClusterConfig) -> list[WorkerSpec]:
    """One worker per GPU; CPU nodes cut into workers of ``worker_cpus`` cores (whole node if 0)."""
    return carve_workers(cluster)


def load_cluster(path: str | Path) -> ClusterConfig:
    """Load and validate a cluster TOML file.

    Args:
        path: the cluster file.
    """
    data = read_toml(path)
    return from_mapping(ClusterConfig, data, str(path))
