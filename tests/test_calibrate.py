"""calibrate: the fit, device discovery, a real local Ray probe, resume/merge, failed cells, bad input."""

from __future__ import annotations

import tomllib
import shutil

import numpy as np
import pytest
import tomli_w

from hetune.real.discovery import discover, local_resources
from hetune.calibrate.fit import amdahl_parallel_fraction, fit_step_time
from hetune.calibrate.runner import CalibrateRequest, run_calibration
from conftest import REPO
from hetune.cli import main
from hetune.sim.cluster import load_cluster
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.throughput import load_calibration

LOCAL = REPO / "configs/clusters/local.toml"


def test_fit_recovers_known_alpha_and_beta():
    rng = np.random.default_rng(0)
    batches = [16, 32, 64, 128, 256]
    times = [0.05 + 0.002 * b for b in batches]
    fit = fit_step_time(batches, times)
    assert fit.alpha_s == pytest.approx(0.05) and fit.beta_s_per_sample == pytest.approx(0.002)
    assert fit.r2 == pytest.approx(1.0) and fit.max_rel_residual < 1e-9
    noisy = [t * (1 + rng.normal(0, 0.01)) for t in times]
    fit = fit_step_time(batches, noisy)
    assert fit.alpha_s == pytest.approx(0.05, abs=0.01) and fit.beta_s_per_sample == pytest.approx(0.002, rel=0.03)
    # a negative intercept is refitted through the origin
    fit = fit_step_time([10, 20], [0.5, 1.5])
    assert fit.alpha_s == 0.0 and fit.beta_s_per_sample > 0
    assert amdahl_parallel_fraction(1.0, 2, 1.5, 1) == pytest.approx(0.5)


def test_discovery_cross_checks_the_config_against_ray():
    cluster = load_cluster(REPO / "configs/clusters/mixed-small.toml")
    nodes = [{"Alive": True, "Resources": {"CPU": 16, "GPU": 2, "accelerator_type:V100": 1}},
             {"Alive": True, "Resources": {"CPU": 16}},
             {"Alive": False, "Resources": {"CPU": 16, "GPU": 2, "accelerator_type:P100": 1}}]
    found = {t.device: t for t in discover(cluster, nodes)}
    assert found["v100"].found and found["v100"].resources == {"accelerator_type:V100": 0.001}
    assert found["cpu"].found and found["cpu"].num_cpus == 8
    assert not found["p100"].found and "P100" in found["p100"].reason  # its node is dead
    assert not found["k80"].found
    assert local_resources(load_cluster(LOCAL)) == {"device:cpu-fast": 1, "device:cpu-slow": 1}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """One real local Ray calibration: resnet18, batches 8 and 16, 2 steps, emulated device types.

    The output starts as a copy of reference.toml and is written with --merge, so the GPU
    entries must survive; a v100 type absent from Ray must be reported as failed cells.
    """
    tmp = tmp_path_factory.mktemp("cal")
    cluster = tomllib.loads(LOCAL.read_text())
    cluster["devices"]["v100"] = {"kind": "gpu", "accelerator_type": "V100"}
    cluster["nodes"].append({"name": "gpu", "device": "v100", "gpus": 1, "cpus": 1})
    (tmp / "cluster.toml").write_text(tomli_w.dumps(cluster))
    out = tmp / "cal.toml"
    shutil.copy(REPO / "configs/calibration/reference.toml", out)
    req = CalibrateRequest(cluster=str(tmp / "cluster.toml"), models=["resnet18"], batch_sizes=[8, 16], steps=2,
                           warmup=1, out=str(out), merge=True, storage=str(tmp / "store"))
    lines: list[str] = []
    result = run_calibration(req, report=lines.append)
    return tmp, req, out, result, lines


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.torch
def test_local_probe_writes_a_file_the_simulator_loads(probed, tmp_path):
    tmp, _, out, result, lines = probed
    cal = load_calibration(out)
    fast, slow = cal.models["resnet18"]["cpu-fast"], cal.models["resnet18"]["cpu-slow"]
    assert fast.source == "measured" and fast.checkpoint_mb > 40 and fast.save_s > 0
    # the emulated slow type is slower on purpose (3x, minus this machine's noise)
    assert slow.step_time_s(16, 1, "cpu") > 1.5 * fast.step_time_s(16, 1, "cpu")
    assert cal.models["resnet18"]["k80"].source == "published"  # --merge kept the reference entries
    assert cal.provenance["data"] == "synthetic CIFAR-shaped batches" and "torch" in cal.provenance
    # --storage: the checkpoint storage timed with the measured checkpoint size (a local folder: read in place)
    assert cal.storage is not None and cal.storage.kind == "local" and cal.storage.upload_mb_s > 0
    assert cal.storage.download_mb_s == 0 and not cal.storage.uri.startswith("/")
    assert "v100" in result["missing"] and any("v100" in line for line in lines)
    failed = [s for s in cal.samples if not s.ok]
    assert {s.device for s in failed} == {"v100"} and all(s.reason for s in failed)
    exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
    inputs = load_inputs(exp, [f"cluster.path={LOCAL}", f"calibration.path={out}", "experiment.population=3",
                               "experiment.stop_iterations=100"])
    assert simulate(inputs, inputs.make_strategy("tune-default"), 0).trials[0].status == "stopped"


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.torch
def test_resume_skips_finished_cells(probed):
    tmp, req, out, _, _ = probed
    before = {(s.device, s.batch): s.step_time_s for s in load_calibration(out).samples
              if s.ok and s.device.startswith("cpu-")}
    req2 = CalibrateRequest(**{**req.__dict__, "batch_sizes": [8, 16, 12], "resume": True, "devices": ["cpu-fast"]})
    run_calibration(req2, report=lambda _: None)
    after = {(s.device, s.batch): s.step_time_s for s in load_calibration(out).samples
             if s.ok and s.device.startswith("cpu-")}
    assert all(after[k] == v for k, v in before.items() if k[0] == "cpu-fast")  # not re-measured
    assert ("cpu-fast", 12) in after


@pytest.mark.parametrize("args,needle", [
    (["--models", "vgg16"], "--models: unknown model 'vgg16'"),
    (["--batch-sizes", "0,32"], "--batch-sizes: batch sizes must be > 0, got 0"),
    (["--data-dir", "/nonexistent/cifar"], "no cifar10 python folder at /nonexistent/cifar/cifar-10-batches-py"),
    (["--address", "127.0.0.1:9"], "--address: cannot reach Ray at '127.0.0.1:9'"),
    (["--cluster", "/nonexistent.toml"], "/nonexistent.toml: file not found"),
    (["--under-load", "--address", "auto"], "--under-load: is for an emulated cluster on this host"),
])
def test_bad_input_gets_one_clear_line(tmp_path, capsys, args, needle):
    out = tmp_path / "cal.toml"
    code = main(["calibrate", "--out", str(out), "--quiet"] + args)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err
    assert not out.exists()


def test_cpu_types_are_timed_at_other_thread_counts_and_amdahl_is_fitted_from_them(tmp_path):
    """A node of 4 cores carved into 1-core workers could run a fused 4-core worker: calibrate times
    1 and 4 threads, and the parallel fraction comes from those cells, not from an assumption."""
    from hetune.calibrate.runner import parallel_fractions, _scaling_cells
    from hetune.real.discovery import DeviceTarget
    from hetune.sim.throughput import Sample

    cluster = tomllib.loads(LOCAL.read_text())
    cluster["nodes"][0].update(cpus=4, worker_cpus=1)
    (tmp_path / "c.toml").write_text(tomli_w.dumps(cluster))
    targets = [DeviceTarget("cpu-fast", "cpu", {}, 0.0, 1, 1.0, True),
               DeviceTarget("cpu-slow", "cpu", {}, 0.0, 1, 3.0, True)]
    req = CalibrateRequest(cluster=str(tmp_path / "c.toml"), models=["resnet18"], batch_sizes=[8, 16], steps=1, out="x")
    cells = _scaling_cells(load_cluster(tmp_path / "c.toml"), targets, req)
    # every batch size: cpu-slow's node has 1 core, so only cpu-fast is timed at 4 threads
    assert [(c[0].num_cpus, c[2], c[5]) for c in cells] == [(4, 8, "cpu-fast@4"), (4, 16, "cpu-fast@4")]
    # step time 1.0 s at batch 16 on 1 core; 0.4 s on 4 cores: (1 - p) + p / 4 = 0.4 -> p = 0.8
    samples = [Sample("resnet18", "cpu-fast", 8, 0.5), Sample("resnet18", "cpu-fast", 16, 1.0),
               Sample("resnet18", "cpu-fast@4", 16, 0.4)]
    assert parallel_fractions(samples, "resnet18", "cpu-fast", 1) == (pytest.approx(0.8), {"16": pytest.approx(0.8)})
    assert parallel_fractions(samples, "resnet18", "cpu-slow", 1) is None
    # timed at two batch sizes: each keeps its own fraction (0.25 s at batch 8 -> p = 0.667), the median
    # of all cells is the fallback for batch sizes and evaluations not timed
    p, by_batch = parallel_fractions(samples + [Sample("resnet18", "cpu-fast@4", 8, 0.25)], "resnet18", "cpu-fast", 1)
    assert by_batch == {"8": pytest.approx(0.6667), "16": pytest.approx(0.8)} and p == pytest.approx((0.8 + 2 / 3) / 2)


def test_under_load_the_other_slots_of_the_emulated_cluster_train():
    """calibrate --under-load: a cell is timed while every slot it leaves free runs a load task."""
    from hetune.calibrate.load import load_slots
    from hetune.sim.cluster import load_cluster

    cluster = load_cluster(REPO / "configs/clusters/fidelity-local.toml")
    # one 1-core cpu-fast cell: the other fast core and both slow cores train
    assert sorted(load_slots(cluster, "cpu-fast", 1)) == [("cpu-fast", 1, 2.0), ("cpu-slow", 1, 6.0),
                                                          ("cpu-slow", 1, 6.0)]
    # the fused 2-core cell of the fast node leaves the slow node's two workers
    assert load_slots(cluster, "cpu-fast", 2) == [("cpu-slow", 1, 6.0), ("cpu-slow", 1, 6.0)]
    assert sorted(load_slots(cluster, "cpu-slow", 2)) == [("cpu-fast", 1, 2.0), ("cpu-fast", 1, 2.0)]
