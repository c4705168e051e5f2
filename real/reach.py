"""Fail fast on a Ray address that cannot work: ray.init can wait for minutes on a closed port,
and hangs printing GCS warnings when the port is served by something that is not Ray."""

from __future__ import annotations

import socket

from hetune.sim.errors import ConfigError

# HTTP/2 client preface plus an empty SETTINGS frame: a gRPC server (Ray's GCS) answers with its
# own SETTINGS frame (frame type 4, the 4th byte of a frame header); an HTTP/1 server or any other
# program answers otherwise or not at all.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise ConfigError unless ``address`` accepts a connection and speaks gRPC within ``timeout_s``.

    Args:
        address: "host:port" or "ray://host:port"; "auto", "local" and "" are left to Ray.
        timeout_s: connect and answer timeout, seconds.
    """
    if address in ("", "auto", "local"):
        return
    client = "://" in address  # ray:// is the Ray Client server, also gRPC
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--address", "", f"expected auto, host:port or ray://host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(_H2_PREFACE)
            head = _read(sock, 9)
    except OSError as exc:
        raise ConfigError("--address", "", f"cannot reach Ray at {address!r} ({exc.strerror or exc})") from None
    if len(head) < 9 or head[3] != 4:
        what = "a Ray client server" if client else "a Ray head node (GCS)"
        raise ConfigError("--address", "", f"{address!r} answers but is not {what}: tried a gRPC handshake "
                          f"and got {head[:16]!r}; check the port (`ray status` on the head node prints it)")


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    try:
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data

