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


@pytest.mark.slow
@pytest.mark.ray
def test_a_head_started_the_usual_way_is_joined_with_its_token(tmp_path, ray_address_file):
    """`ray start --head` on a host with a token in ~/.ray/auth_token (Ray 2.60 turns token
    authentication on then; `ray.init()` and `ray get-auth-token --generate` leave one there):
    `--address` works for a user who has the token and fails in one line, naming authentication,
    for one who has not."""
    import socket
    import subprocess
    import sys

    from conftest import REPO, ray_head_process

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("5f2c9d0e8b7a41c3a6e4d2b1f0c9e8d7\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env["HOME"] = str(home)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ray_head_process(port, env, settle_s=3.0) as address:
        exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
        sweep = [sys.executable, "-m", "hetune.cli", "sweep", str(exp), "--strategies", "hrfs", "--seeds", "1",
                 "--quiet", "--address", address]
        ok = subprocess.run(sweep + ["--out", str(tmp_path / "with-token")], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
        assert ok.returncode == 0, ok.stderr[-1500:]
        assert (tmp_path / "with-token" / "sweep.csv").is_file()
        stranger = tmp_path / "stranger"
        stranger.mkdir()
        t0 = time.time()
        no = subprocess.run(sweep + ["--out", str(tmp_path / "without")], env=dict(env, HOME=str(stranger)),
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
        lines = no.stderr.strip().splitlines()
        assert no.returncode == 2 and len(lines) == 1 and "authentication" in lines[0], no.stderr[-1500:]
        assert time.time() - t0 < 30  # Python and Ray's import included
        assert not (tmp_path / "without").exists()
