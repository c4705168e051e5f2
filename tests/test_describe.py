"""`hetune cluster describe`: a running Ray cluster as a cluster file (issue "Types a checker can read",
item 6)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import REPO, ray_head_process
from hetune.real.describe import describe
from hetune.sim.cluster import load_cluster
from hetune.sim.tomlfile import atomic_write_toml


def _node(cpus, gpus=0, alive=True, **extra):
    res = {"CPU": float(cpus), "memory": 64 * 2**30, "node:10.0.0.1": 1.0, **extra}
    if gpus:
        res["GPU"] = float(gpus)
    return {"Alive": alive, "Resources": res}


def test_one_device_type_per_kind_of_node(tmp_path):
    nodes = [_node(16, 4, **{"accelerator_type:V100": 1.0}), _node(16, 4, **{"accelerator_type:V100": 1.0}),
             _node(8, 1, **{"accelerator_type:A100": 1.0}), _node(32), _node(32), _node(8, 0, alive=False),
             _node(2, 0, **{"device:cpu-slow": 1.0})]
    data, header = describe(nodes, "lab")
    atomic_write_toml(tmp_path / "lab.toml", data, header=header)
    cluster = load_cluster(tmp_path / "lab.toml")  # a file the loader accepts as it is
    groups = {(n.device, n.count, n.cpus, n.gpus) for n in cluster.nodes}
    assert groups == {("v100", 2, 16, 4), ("a100", 1, 8, 1), ("cpu", 2, 32, 0), ("cpu-slow", 1, 2, 0)}
    assert cluster.devices["v100"].accelerator_type == "V100" and cluster.devices["v100"].link_gbps > 0
    assert cluster.devices["cpu"].kind == "cpu"
    # what Ray cannot know is said in the file, not guessed silently
    text = (tmp_path / "lab.toml").read_text()
    assert "Assumed" in text and "price_per_hour = 0" in text and "64 GiB" in text


def test_a_cluster_without_alive_nodes_is_refused():
    with pytest.raises(ValueError, match="no alive Ray node"):
        describe([_node(4, alive=False)], "x")


def test_an_unreachable_address_gets_one_line_and_no_file(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    out = tmp_path / "c.toml"
    r = subprocess.run([sys.executable, "-m", "hetune.cli", "cluster", "describe", "--address", f"127.0.0.1:{port}",
                        "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--address" in r.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.ray
def test_describe_a_running_head_then_sweep_on_it(tmp_path, ray_address_file):
    """A local `ray start --head` that says it has two V100s: described, then swept with the shipped
    reference calibration (which has V100 rows). Calibrating it is the README's middle command; an
    emulated GPU cannot run a probe here."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    extra = ("--num-gpus=2", "--resources=" + json.dumps({"accelerator_type:V100": 1}))
    out = tmp_path / "mine.toml"
    with ray_head_process(6393, env, settle_s=3.0, extra=extra) as address:
        r = subprocess.run([sys.executable, "-m", "hetune.cli", "cluster", "describe", "--address", address,
                            "--out", str(out)], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "v100 (gpu)" in r.stdout
    cluster = load_cluster(out)
    assert [(n.device, n.gpus) for n in cluster.nodes] == [("v100", 2)]
    exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
    sweep = subprocess.run([sys.executable, "-m", "hetune.cli", "sweep", str(exp), "--strategies", "tune-default",
                            "--seeds", "1", "--quiet", "--set", f"cluster.path={out}", "--out", str(tmp_path / "s")],
                           capture_output=True, text=True, cwd=REPO, timeout=300)
    assert sweep.returncode == 0, sweep.stderr[-1500:]


def test_an_existing_file_is_kept_unless_force(tmp_path):
    out = tmp_path / "mine.toml"
    out.write_text("# mine\n")
    r = subprocess.run([sys.executable, "-m", "hetune.cli", "cluster", "describe", "--address", "127.0.0.1:1",
                        "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--force" in r.stderr
    assert out.read_text() == "# mine\n"


def test_an_address_that_is_not_ray_gets_one_line_and_no_file(tmp_path):
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "c.toml"
    try:
        r = subprocess.run([sys.executable, "-m", "hetune.cli", "cluster", "describe", "--address",
                            f"127.0.0.1:{server.server_address[1]}", "--out", str(out)],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    finally:
        server.shutdown()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--address" in r.stderr, r.stderr
    assert not out.exists()


def test_a_cluster_without_nodes_gets_one_line_and_no_file(tmp_path, monkeypatch, capsys):
    """A Ray cluster whose nodes are all gone (ray.nodes() lists only dead ones)."""
    import hetune.real.ray_init as ray_init
    from hetune.cli import main

    class NoNodes:
        def nodes(self):
            return [_node(4, alive=False)]

        def shutdown(self):
            pass

    monkeypatch.setattr(ray_init, "init_ray", lambda address, **kw: NoNodes())
    out = tmp_path / "c.toml"
    assert main(["cluster", "describe", "--address", "10.0.0.1:6379", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no alive Ray node" in err[0]
    assert not out.exists()
