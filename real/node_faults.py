"""The experiment's ``[faults]`` replayed on the emulated one-host cluster of a real run.

At each failure time of a node (sim/faults.py's ``node_outages``: the same times the simulator
uses for this seed) the node's raylet and every process on it are killed
(``Cluster.remove_node``), so its trials' actors die as on a lost machine and Ray Tune restarts
them from their checkpoints (``FailureConfig``); after the node's down time an identical node
(same device and slot resources) joins again. Times count from the run's time 0.

It is a Tune callback acting at the start of each controller step, on Tune's own thread: Ray
registers signal handlers when a node starts, which only the main thread may do, and the node's
processes die with the thread that started them (the parent-death signal is per thread).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ray.tune import Callback

if TYPE_CHECKING:
    from hetune.sim.loader import RunInputs


class EmulatedNodeFaults(Callback):
    """Kill and bring back nodes of a ``ray.cluster_utils.Cluster`` on schedule.

    Args:
        cluster: the emulated cluster.
        nodes: node name -> (its Ray node handle, the ``add_node`` arguments that made it).
        outages: node name -> iterator of (seconds up, seconds down or None for good).
        t0: wall-clock time of the run's time 0 (``time.time()``), read when the first step begins.
        on_change: called with (node name, "worker_removed" | "worker_added", wall time).
    """

    def __init__(self, cluster: Any, nodes: dict[str, tuple[Any, dict[str, Any]]],
                 outages: dict[str, Iterator[tuple[float, float | None]]], t0: Callable[[], float],
                 on_change: Callable[[str, str, float], None] | None = None) -> None:
        self.cluster = cluster
        self.nodes = nodes
        self.outages = {name: it for name, it in outages.items() if name in nodes}
        self.t0 = t0
        self.on_change = on_change
        # node -> (run time of its next change, "remove" | "add", seconds down after a removal)
        self._next: dict[str, tuple[float, str, float | None]] = {}
        for name in self.outages:
            self._schedule(name, 0.0)

    def _schedule(self, name: str, since: float) -> None:
        step = next(self.outages[name], None)
        if step is not None:
            up_s, down_s = step
            self._next[name] = (since + up_s, "remove", down_s)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.time() - self.t0()
        for name in sorted(self._next):
            at, action, down_s = self._next[name]
            if now < at:
                continue
            handle, args = self.nodes[name]
            if action == "remove":
                self.cluster.remove_node(handle, allow_graceful=False)
                del self._next[name]
                if down_s is not None:
                    self._next[name] = (at + down_s, "add", None)
                change = "worker_removed"
            else:
                self.nodes[name] = (self.cluster.add_node(**args), args)
                del self._next[name]
                self._schedule(name, at)
                change = "worker_added"
            if self.on_change is not None:
                self.on_change(name, change, time.time())

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles callbacks with the experiment; the cluster (locks, processes) stays here and
        # an unpickled copy is inert: a resumed run replays no faults (its clock restarted).
        return {"cluster": None, "nodes": {}, "outages": {}, "t0": time.time, "on_change": None, "_next": {}}


def fault_callbacks(inputs: "RunInputs", emulated: Any, log: Any, seed: int, resume: bool) -> list[Any]:
    """Callbacks replaying the experiment's ``[faults]`` on the emulated cluster (``emulated``),
    recorded in ``log`` (the run's EventLog) as the simulator records them; none on a real cluster
    (its own failures are recorded as they come) or on a resumed run (its clock restarted)."""
    faults = inputs.experiment.faults
    if emulated is None or resume or not faults.enabled:
        return []
    from hetune.sim.faults import node_outages

    def record(node: str, kind: str, wall: float) -> None:
        for i, w in enumerate(log.workers):
            if w.node == node:
                log.worker_event(log.now(wall), kind, i)

    return [EmulatedNodeFaults(emulated, emulated.hetune_nodes, node_outages(faults, inputs.cluster, seed),
                               lambda: log.t0, record)]
