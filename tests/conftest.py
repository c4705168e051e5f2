"""Shared test helpers: small, exact configs and adaptation tables written into tmp_path."""

from __future__ import annotations

import contextlib
import csv
import itertools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hetune.sim.strategies.base import IDLE, RETIRE, Ordering, Run, Strategy

REPO = Path(__file__).resolve().parents[1]


def bench_module(name: str) -> Any:
    """A module of bench/ (scripts, not a package), imported with bench/ on the path as its scripts run."""
    import importlib

    sys.path.insert(0, str(REPO / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)

# Round numbers so closed-form answers are exact in binary floating point.
FAST = {"alpha_s": 0.5, "beta_s_per_sample": 0.0, "eval_s": 2.0, "checkpoint_mb": 125.0,
        "save_s": 1.0, "load_s": 4.0, "start_overhead_s": 8.0, "stem": "cifar"}
SLOW = dict(FAST, alpha_s=2.0)


def write_setup(tmp: Path, *, population: int = 4, stop: int = 100, interval: int = 50, ckpt: int = 50,
                nodes: list[dict[str, Any]] | None = None, devices: dict[str, Any] | None = None,
                models: dict[str, Any] | None = None, target: float = 1.0, noise: float = 0.0,
                synch: bool = False, extra: dict[str, Any] | None = None) -> Path:
    """Write cluster, calibration and experiment files; return the experiment path."""
    devices = devices or {"fast": {"kind": "gpu", "price_per_hour": 2.0, "link_gbps": 100.0},
                          "slow": {"kind": "gpu", "price_per_hour": 1.0, "link_gbps": 100.0}}
    nodes = nodes or [{"name": "n0", "device": "fast", "gpus": 2, "cpus": 8}]
    cluster = {"cluster": {"name": "test", "network_gbps": 8.0}, "devices": devices, "nodes": nodes}
    calib = {"provenance": {"source": "test"}, "models": {"resnet18": models or {"fast": FAST, "slow": SLOW}}}
    exp: dict[str, Any] = {
        "experiment": {"name": "t", "model": "resnet18", "dataset": "cifar10", "population": population,
                       "batch_size": 512, "stop_iterations": stop, "target_accuracy": target,
                       "checkpoint_interval": ckpt, "seed": 0},
        "cluster": {"path": "cluster.toml"},
        "calibration": {"path": "calib.toml"},
        "pbt": {"perturbation_interval": interval, "synch": synch,
                "mutations": {"lr": {"kind": "uniform", "low": 0.0001, "high": 1.0, "clip": True},
                              "momentum": {"kind": "choice", "values": [0.8, 0.9, 0.99]}}},
        # the bell curve: these small exact setups state their evaluation noise (``noise``) and
        # expect nothing else (the default noisy quadratic model adds binomial and seed noise)
        "learning": {"kind": "bell"},
        "surrogate": {"noise_std": noise},
    }
    for k, v in (extra or {}).items():
        exp.setdefault(k, {}).update(v)
    (tmp / "cluster.toml").write_text(tomli_w.dumps(cluster))
    (tmp / "calib.toml").write_text(tomli_w.dumps(calib))
    (tmp / "exp.toml").write_text(tomli_w.dumps(exp))
    return tmp / "exp.toml"


RAY_ADDRESS_FILE = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"


@pytest.fixture
def ray_address_file():
    """A Ray driver or head that a test kills leaves /tmp/ray/ray_current_cluster naming its dead
    cluster, and a later plain ``ray.init()`` on this host would try to join it: the file is put back
    as it was before the test."""
    before = RAY_ADDRESS_FILE.read_bytes() if RAY_ADDRESS_FILE.is_file() else None
    yield
    if before is None:
        RAY_ADDRESS_FILE.unlink(missing_ok=True)
    else:
        RAY_ADDRESS_FILE.write_bytes(before)


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``: what a test's killed driver (started with
    start_new_session=True) left running, by id, and nothing else."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def wait_for_port(port: int, timeout_s: float) -> None:
    """Return once something accepts connections on 127.0.0.1:``port``, or after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)


@contextlib.contextmanager
def ray_head_process(port: int, env: dict[str, str], settle_s: float = 2.0, extra: tuple[str, ...] = ()):
    """A local Ray head (1 CPU) at 127.0.0.1:``port``, yielding its address.

    Started with ``ray start --head --block`` in its own session and stopped through that session
    only: `ray stop` would end every Ray process on the host, other users' and other runs' included.

    Args:
        port: the GCS port.
        env: the head's environment (HOME and RAY_AUTH_* decide its authentication).
        settle_s: seconds to wait after the port answers (the head's raylet joins a moment later).
        extra: more ``ray start`` arguments (emulated GPUs and resources, say).
    """
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    proc = subprocess.Popen([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1",
                             "--include-dashboard=false", "--block", *extra], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, 90)
        time.sleep(settle_s)
        yield f"127.0.0.1:{port}"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=30)
                break
            except (OSError, subprocess.TimeoutExpired):
                continue
        time.sleep(1)
        kill_session(proc.pid)  # whatever left its process group, by id


class FastestOnly(Strategy):
    """A strategy as a user would add one, defined here rather than in sim/strategies: it retires
    every worker but the fastest, which runs the least-progressed trial one perturbation interval
    at a time. ``chunks`` lists the (worker, trial, iterations) of every chunk it is told of.
    Register it (``strategies.register``) where a test needs it by name, and pop it afterwards."""

    name = "test-fastest-only"
    summary = "the fastest worker alone"

    def __init__(self, params: Any = None) -> None:
        super().__init__(params)
        self.chunks: list[tuple[int, int, int]] = []

    def assign(self, worker, view):
        if worker.step_time_s > view.fastest_step_time_s():
            return RETIRE
        t = view.peek(Ordering.LEAST_PROGRESSED)
        return IDLE if t is None else Run(t.id, view.interval)

    def on_chunk(self, worker, trial, iterations, seconds, view):
        self.chunks.append((worker.id, trial.id, iterations))


@pytest.fixture
def setup(tmp_path: Path):
    """Factory: setup(**kwargs) -> experiment path in tmp_path."""
    return lambda **kw: write_setup(tmp_path, **kw)


@pytest.fixture
def default_experiment() -> Path:
    return REPO / "configs" / "experiments" / "pbt-resnet18-cifar10.toml"


# Adaptation tables (test_adapt, test_plots, test_outdir)
COLS = ["a1", "a2", "a3", "t1", "t2", "t3", "total_time", "acc", "model"]


def write_table(path: Path, best: tuple[int, int, int] = (1, 0, 3), model: str = "convnet2",
                drop: int | None = None, bad: dict[str, Any] | None = None) -> Path:
    """A synthetic 64-row adaptation table whose best sequence is ``best``; ``drop`` removes a row,
    ``bad`` overwrites fields of row 5 (for refusal tests)."""
    rows = []
    for seq in itertools.product(range(4), repeat=3):
        acc = 0.5 + 0.1 * sum(a == b for a, b in zip(seq, best)) + 0.01 * seq[2]
        rows.append({"a1": seq[0], "a2": seq[1], "a3": seq[2], "t1": 300, "t2": 250 - 10 * seq[0],
                     "t3": 200 - 10 * (seq[0] + seq[1]), "total_time": 400, "acc": round(min(acc, 1.0), 4),
                     "model": model})
    if drop is not None:
        rows.pop(drop)
    if bad is not None:
        rows[5].update(bad)
    extra = sorted({k for r in rows for k in r} - set(COLS))  # optional columns (acc_se, acc_runs)
    write_rows(path, rows, COLS + extra)
    return path


def write_rows(path: Path, rows: list[dict[str, Any]], fields: list[str]) -> None:
    """Rows (dicts) as a CSV with these columns."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def s3_storage(monkeypatch):
    """An S3-compatible server on loopback (moto's, from the test extra) with a bucket "hetune":
    yields the storage URI a run names (``real.storage_path``); any credentials do, set in the
    environment that Ray's processes inherit. The server is ended by its id."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, 30)
        for key, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                           ("AWS_DEFAULT_REGION", "us-east-1")):
            monkeypatch.setenv(key, value)
        import boto3

        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}").create_bucket(Bucket="hetune")
        yield f"s3://hetune/runs?endpoint_override=127.0.0.1:{port}&scheme=http"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
