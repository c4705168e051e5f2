"""Run sweep cells as Ray tasks on an existing Ray cluster (kept outside sim/, which never imports ray)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from hetune.sim.sweep import Cell


class RayExecutor:
    """Cells as Ray tasks, one CPU each.

    Args:
        address: "auto" or "ray://host:port".
    """

    def __init__(self, address: str) -> None:
        from hetune.real.ray_init import init_ray

        self._ray = init_ray(address, ignore_reinit_error=True)

    def map_unordered(self, fn: Callable[[Cell], dict[str, Any]], cells: Sequence[Cell]) -> Iterator[dict[str, Any]]:
        remote = self._ray.remote(num_cpus=1)(fn)
        pending = [remote.remote(c) for c in cells]
        try:
            while pending:
                ready, pending = self._ray.wait(pending, num_returns=1)
                yield self._ray.get(ready[0])
        finally:
            self._ray.shutdown()
