"""``hetune cluster describe``: the cluster file of a running Ray cluster.

Reads ``ray.nodes()`` (the alive nodes' CPUs, GPUs, ``accelerator_type:<X>`` labels, memory and
hetune's own ``device:<name>`` resources) and writes a cluster file with one device type per
distinct kind of node, ready for ``hetune calibrate --cluster``. What Ray does not know is stated,
not guessed silently: prices are 0 (set your own to rank by cost), the network between nodes and
the link between a node's GPUs are assumed values, named in the file's header.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

ASSUMED_NETWORK_GBPS = 10.0  # between nodes: a common datacentre Ethernet; measure yours and edit
ASSUMED_LINK_GBPS = 100.0  # between the GPUs of one node: PCIe 3.0 x16, about 12 GB/s


def _device_of(resources: Mapping[str, float]) -> tuple[str, str, str]:
    """(device type name, kind, accelerator label) of one node from its Ray resources."""
    custom = sorted(k.split(":", 1)[1] for k in resources if k.startswith("device:"))
    accel = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
    gpus = resources.get("GPU", 0.0)
    if gpus >= 1:
        label = accel[0] if accel else ""
        name = custom[0] if custom else (label.lower().replace(" ", "-") if label else "gpu")
        return name, "gpu", label
    return (custom[0] if custom else "cpu"), "cpu", ""


def describe(nodes: Iterable[Mapping[str, Any]], name: str) -> tuple[dict[str, Any], str]:
    """A cluster file's table and its header from ``ray.nodes()`` entries.

    Nodes of one device type with the same CPUs and GPUs form one ``[[nodes]]`` group (``count``);
    a device type with several kinds of node gets one group per kind.

    Args:
        nodes: ``ray.nodes()`` entries; dead nodes are skipped.
        name: the cluster's name.

    Raises:
        ValueError: no alive node with a CPU.
    """
    groups: Counter[tuple[str, str, str, int, int]] = Counter()
    memory: dict[tuple[str, int, int], float] = {}
    for n in nodes:
        res = n.get("Resources") or {}
        if not n.get("Alive", False) or res.get("CPU", 0) < 1:
            continue
        device, kind, label = _device_of(res)
        cpus, gpus = int(res.get("CPU", 0)), int(res.get("GPU", 0)) if kind == "gpu" else 0
        groups[(device, kind, label, cpus, gpus)] += 1
        memory[(device, cpus, gpus)] = float(res.get("memory", 0.0)) / 2**30
    if not groups:
        raise ValueError("no alive Ray node with a CPU")
    devices: dict[str, dict[str, Any]] = {}
    node_rows: list[dict[str, Any]] = []
    for (device, kind, label, cpus, gpus), count in sorted(groups.items()):
        d = devices.setdefault(device, {"kind": kind, "price_per_hour": 0.0})
        if label:
            d["accelerator_type"] = label
        if gpus > 1:
            d["link_gbps"] = ASSUMED_LINK_GBPS
        same = [g for g in groups if g[0] == device]
        row: dict[str, Any] = {"name": device if len(same) == 1 else f"{device}-{cpus}cpu-{gpus}gpu",
                               "device": device, "count": count, "cpus": cpus, "gpus": gpus}
        node_rows.append(row)
    data = {"description": f"described from a running Ray cluster: {sum(groups.values())} node(s)",
            "cluster": {"name": name, "network_gbps": ASSUMED_NETWORK_GBPS},
            "devices": devices, "nodes": node_rows}
    mem = ", ".join(f"{d} ({c} CPUs, {g} GPUs): {m:.0f} GiB" for (d, c, g), m in sorted(memory.items()))
    header = (f"Written by `hetune cluster describe` from the Ray cluster's nodes (memory per node: {mem}).\n"
              f"Assumed, edit to match: network_gbps = {ASSUMED_NETWORK_GBPS:g} between nodes, link_gbps = "
              f"{ASSUMED_LINK_GBPS:g} between the GPUs of a node, price_per_hour = 0 (no cost ranking).\n"
              "Next: hetune calibrate --cluster THIS_FILE --address ADDR, then sweep with cluster.path = THIS_FILE.")
    return data, header
