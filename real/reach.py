"""Fail fast on an unreachable Ray address (ray.init can wait for minutes on a closed port)."""

from __future__ import annotations

import socket

from hetune.sim.errors import ConfigError


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise ConfigError unless a TCP connection to ``address`` opens within ``timeout_s`` seconds.

    Args:
        address: "host:port" or "ray://host:port"; "auto" and "" are left to Ray.
        timeout_s: connection timeout, seconds.
    """
    if address in ("", "auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--address", "", f"expected auto, host:port or ray://host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError("--address", "", f"cannot reach Ray at {address!r} ({exc.strerror or exc})") from None
