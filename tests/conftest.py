"""Small, exact configs written into tmp_path for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import toml

REPO = Path(__file__).resolve().parents[1]

# Round numbers so closed-form answers are exact in binary floating point.
FAST = {"alpha_s": 0.5, "beta_s_per_sample": 0.0, "eval_s": 2.0, "checkpoint_mb": 125.0,
        "save_s": 1.0, "load_s": 4.0, "start_overhead_s": 8.0, "multi_device_efficiency": 1.0}
SLOW = dict(FAST, alpha_s=2.0)


def write_setup(tmp: Path, *, population: int = 4, stop: int = 100, interval: int = 50, ckpt: int = 50,
                nodes: list[dict[str, Any]] | None = None, devices: dict[str, Any] | None = None,
                models: dict[str, Any] | None = None, target: float = 1.0, noise: float = 0.0,
                synch: bool = False, extra: dict[str, Any] | None = None) -> Path:
    """Write cluster, calibration and experiment files; return the experiment path."""
    devices = devices or {"fast": {"kind": "gpu", "price_per_hour": 2.0}, "slow": {"kind": "gpu", "price_per_hour": 1.0}}
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
        "surrogate": {"noise_std": noise},
    }
    for k, v in (extra or {}).items():
        exp.setdefault(k, {}).update(v)
    (tmp / "cluster.toml").write_text(toml.dumps(cluster))
    (tmp / "calib.toml").write_text(toml.dumps(calib))
    (tmp / "exp.toml").write_text(toml.dumps(exp))
    return tmp / "exp.toml"


@pytest.fixture
def setup(tmp_path: Path):
    """Factory: setup(**kwargs) -> experiment path in tmp_path."""
    return lambda **kw: write_setup(tmp_path, **kw)


@pytest.fixture
def default_experiment() -> Path:
    return REPO / "configs" / "experiments" / "pbt-resnet18-cifar10.toml"
