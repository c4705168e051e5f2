"""Ray's noise and misleading failures kept from the user (issue "Reliability", item 5)."""

from __future__ import annotations

import http.server
import os
import threading
import time

import pytest

from hetune.real.ray_init import use_token_auth_if_available
from hetune.real.reach import check_reachable
from hetune.sim.errors import ConfigError


def test_a_port_that_is_not_ray_is_refused_in_one_line_at_once():
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(ConfigError) as err:
            check_reachable(f"127.0.0.1:{server.server_address[1]}")
        assert time.perf_counter() - t0 < 10
        text = str(err.value)
        assert "is not a Ray head node" in text and "gRPC" in text and "\n" not in text
    finally:
        server.shutdown()
        server.server_close()


def test_a_closed_port_is_refused():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ConfigError, match="cannot reach Ray"):
        check_reachable(f"127.0.0.1:{port}")


def test_token_auth_is_used_when_a_token_is_available(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not use_token_auth_if_available("10.0.0.1:6379")  # no token anywhere
    assert "RAY_AUTH_MODE" not in os.environ
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("secret\n")
    assert not use_token_auth_if_available("local")  # a new local instance: Ray's own default
    assert use_token_auth_if_available("10.0.0.1:6379")
    assert os.environ["RAY_AUTH_MODE"] == "token"
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the user's choice is respected
    assert not use_token_auth_if_available("10.0.0.1:6379")
