"""Strong scaling and one network per model (issue 24, items 1-2): no calibration makes n devices more
than n times one device's speed or beats the no-communication bound; rows of another network are refused."""

from __future__ import annotations

import dataclasses

import tomli_w
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from hetune.cli import main
from hetune.sim.errors import ConfigError
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.schema import from_mapping
from hetune.sim.throughput import DeviceModel, load_calibration

REFERENCE = REPO / "configs/calibration/reference.toml"
EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"

positive = st.floats(min_value=1e-6, max_value=10.0, allow_nan=False)
rows = st.fixed_dictionaries(
    {"alpha_s": positive, "beta_s_per_sample": positive, "stem": st.sampled_from(["cifar", "imagenet"]),
     "gradient_mb": st.floats(0, 500), "parallel_fraction": st.floats(0, 1),
     "reference_cores": st.integers(1, 64)},
    optional={"speedup": st.dictionaries(st.sampled_from(["2", "4", "8"]), st.floats(0.01, 16.0), min_size=1),
              "speedup_batch": st.integers(1, 1024)})


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(row=rows, batch=st.integers(1, 1024), n=st.integers(1, 64), link=st.floats(0, 1000))
def test_no_calibration_beats_linear_scaling_or_the_no_communication_bound(row, batch, n, link):
    try:
        dm = from_mapping(DeviceModel, row, "calib.toml", "models.m.d")
    except ConfigError:
        return  # refused rows (a superlinear speedup, a speedup without its batch) are covered below
    gpu_1, gpu_n = dm.step_time_s(batch, 1, "gpu", link), dm.step_time_s(batch, n, "gpu", link)
    assert gpu_n >= dm.alpha_s + dm.beta_s_per_sample * batch / n - 1e-12  # the no-communication bound
    assert gpu_1 / gpu_n <= n + 1e-9
    cpu_1, cpu_n = dm.step_time_s(batch, 1, "cpu"), dm.step_time_s(batch, n, "cpu")
    assert cpu_1 / cpu_n <= n + 1e-9


def test_shipped_gpu_rows_stay_under_the_bound_at_the_default_batch():
    """The old model gave 4 V100s 3.83x at batch 512 (Gavel's weak-scaling rows read as strong
    scaling); the one-GPU fit's own bound alpha + beta B / 4 allows 2.55x."""
    cal = load_calibration(REFERENCE)
    for model, per_device in cal.models.items():
        for device, dm in per_device.items():
            if device in ("k80", "p100", "v100"):
                bound = (dm.alpha_s + dm.beta_s_per_sample * 512) / (dm.alpha_s + dm.beta_s_per_sample * 128)
                speedup = dm.step_time_s(512, 1, "gpu", 400.0) / dm.step_time_s(512, 4, "gpu", 400.0)
                assert 1.0 < speedup <= bound, (model, device, speedup, bound)
                assert dm.stem == "cifar"
    v100 = cal.models["resnet18"]["v100"]
    assert v100.step_time_s(512, 1, "gpu") / v100.step_time_s(512, 4, "gpu", 400.0) < 2.6


def _calib(tmp_path, rows: dict) -> str:
    path = tmp_path / "calib.toml"
    path.write_text(tomli_w.dumps({"provenance": {"source": "test"}, "models": {"resnet18": rows}}))
    return str(path)


GOOD = {"alpha_s": 0.1, "beta_s_per_sample": 0.001, "stem": "cifar"}


@pytest.mark.parametrize("rows, needle", [
    ({"fast": dict(GOOD, speedup={"2": 2.4}, speedup_batch=256)},
     "models.resnet18.fast.speedup.2: 2.4 on 2 GPUs is more than linear (efficiency 1.20 > 1)"),
    ({"fast": dict(GOOD, speedup={"2": 1.5})}, "models.resnet18.fast.speedup_batch: must be >= 1"),
    ({"fast": dict(GOOD, start_overhead_s=-1.0)}, "models.resnet18.fast.start_overhead_s: must be >= 0, got -1.0"),
    ({"fast": GOOD, "slow": dict(GOOD, stem="imagenet")}, "models.resnet18.slow.stem: mixes network variants"),
    ({"fast": dict(GOOD, multi_device_efficiency=0.9)}, "models.resnet18.fast.multi_device_efficiency: unknown key"),
])
def test_bad_calibration_rows_get_one_line_naming_file_row_and_field(tmp_path, rows, needle):
    path = _calib(tmp_path, rows)
    with pytest.raises(ConfigError) as err:
        load_calibration(path)
    assert str(err.value).startswith(f"{path}: ") and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_rows_of_another_network_are_refused_by_the_experiment(setup, tmp_path, capsys):
    imagenet = dict(GOOD, stem="imagenet", alpha_s=0.5)
    exp = setup(models={"fast": imagenet, "slow": imagenet})
    with pytest.raises(ConfigError, match=r"models\.resnet18\.fast\.stem: measured on the imagenet-stem resnet18, "
                                          r"but .* trains the cifar-stem one \(experiment\.stem\)"):
        load_inputs(exp)
    assert load_inputs(exp, ["experiment.stem=imagenet"]).experiment.experiment.stem == "imagenet"
    assert main(["simulate", str(exp), "--out", str(tmp_path / "run")]) == 2
    assert "experiment.stem" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_multi_gpu_node_needs_its_interconnect(setup):
    exp = setup(devices={"fast": {"kind": "gpu"}, "slow": {"kind": "gpu"}})
    with pytest.raises(ConfigError, match=r"devices\.fast\.link_gbps: needed for node 'n0' with 2 GPUs"):
        load_inputs(exp)


def test_the_all_reduce_is_charged_over_the_link():
    dm = DeviceModel(alpha_s=0.0, beta_s_per_sample=0.001, stem="cifar", gradient_mb=100.0)
    # 4 GPUs: ring all-reduce moves 2 * 3/4 * 100 MB = 150 MB = 1.2 Gb over 12 Gb/s: 0.1 s
    assert dm.step_time_s(400, 4, "gpu", 12.0) == pytest.approx(0.1 + 0.1)
    measured = DeviceModel(alpha_s=0.0, beta_s_per_sample=0.001, stem="cifar", speedup={"4": 2.0}, speedup_batch=400)
    # measured 2x on 4 GPUs at batch 400: 0.2 s a step, 0.1 of it communication, whatever the link
    assert measured.step_time_s(400, 4, "gpu", 12.0) == pytest.approx(0.2)
    assert measured.step_time_s(400, 2, "gpu", 12.0) == pytest.approx(0.2 + 0.1 * (1 / 1.5))


def test_a_measured_resume_is_charged_at_every_restart(setup):
    """Calibrate's Tune probe measures a restart apart from a first start; the engine charges it."""
    from conftest import FAST
    from hetune.sim.engine import simulate

    exp = setup(population=2, stop=150, interval=50, ckpt=50, models={"fast": dict(FAST, resume_s=3.0)},
                nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8}])
    inputs = load_inputs(exp)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    starts = [e["duration_s"] for e in events if e["kind"] == "trial_start"]
    resumes = [e["duration_s"] for e in events if e["kind"] == "resume"]
    assert starts == [FAST["start_overhead_s"]] * 2
    assert resumes and all(d == 3.0 + FAST["load_s"] for d in resumes)


def test_overheads_are_read_off_the_probe_timeline():
    from hetune.calibrate.overheads import summarise

    def result(step, wall, load=0.0):
        return {"step": step, "wall_time": wall, "step_s": 0.5, "eval_s": 0.0, "load_s": load}

    # fit() at 100; first work at 104.5; paused (saved) at 3 and 5, work again 2.0 and 2.4 s later
    results = [result(1, 105.0), result(2, 105.5), result(3, 106.0), result(4, 108.6, load=0.1),
               result(5, 109.1), result(6, 112.0, load=0.3)]
    saves = [{"step": 3, "wall_time": 106.1, "save_s": 0.1}, {"step": 4, "wall_time": 108.7, "save_s": 0.2},
             {"step": 5, "wall_time": 109.2, "save_s": 0.3}]
    got = summarise(100.0, results, saves)
    assert got["start_overhead_s"] == pytest.approx(4.5)
    # resume = work start after the pause - the pause's save end - restore: (108.1 - 106.1 - 0.1), (111.5 - 109.2 - 0.3)
    assert got["resume_s"] == pytest.approx((1.9 + 2.0) / 2)
    assert got["save_s"] == pytest.approx(0.2) and got["load_s"] == pytest.approx(0.2)
    with pytest.raises(RuntimeError, match="did not save at its pause at iteration 3"):
        summarise(100.0, results, saves[1:])


def test_a_calibration_from_another_host_or_software_is_named_in_one_line():
    from hetune.real.provenance import calibration_note

    here = {"host": "lab-1", "torch": "2.14.1", "ray": "2.60.0", "python": "3.11.7"}
    assert calibration_note({"host": "lab-1", "torch": "2.14.1", "ray": "2.60.0"}, "cal.toml", here) is None
    other = calibration_note({"host": "vm"}, "cal.toml", here)
    assert other.startswith("cal.toml was measured on host 'vm', not on 'lab-1'") and "\n" not in other
    assert "no measuring host" in calibration_note({"gpu_source": "published"}, "ref.toml", here)
    assert "torch 2.13.0 there, 2.14.1 here" in calibration_note({"host": "lab-1", "torch": "2.13.0"}, "c", here)


def test_evaluation_is_charged_like_the_rest_of_the_work_on_each_worker():
    from hetune.sim.enums import DeviceKind
    from hetune.sim.throughput import DeviceModel

    cpu = DeviceModel(alpha_s=1.0, beta_s_per_sample=0.0, stem="cifar", eval_s=40.0, reference_cores=2,
                      parallel_fraction=0.8)
    # measured on 2 cores: 8 cores take (0.2 + 0.8 * 2 / 8) of it, 1 core (0.2 + 0.8 * 2)
    assert cpu.eval_time_s(2, DeviceKind.CPU) == 40.0
    assert cpu.eval_time_s(8, DeviceKind.CPU) == pytest.approx(40.0 * 0.4)
    assert cpu.eval_time_s(1, DeviceKind.CPU) == pytest.approx(40.0 * 1.8)
    # threads timed at batch 8 gained less: a step at batch 8 uses that fraction, evaluation the median
    timed = dataclasses.replace(cpu, parallel_fraction_batch={"8": 0.2})
    assert timed.step_time_s(8, 8, DeviceKind.CPU) == pytest.approx(0.8 + 0.2 * 2 / 8)
    assert timed.step_time_s(16, 8, DeviceKind.CPU) == pytest.approx(0.4)
    assert timed.eval_time_s(8, DeviceKind.CPU) == pytest.approx(16)
    assert list(dataclasses.replace(cpu, parallel_fraction_batch={"8": 1.5, "x": 0.5}).check()) == [
        ("parallel_fraction_batch.8", "must be in [0, 1], got 1.5"),
        ("parallel_fraction_batch.x", "keys are batch sizes >= 1")]
    gpu = DeviceModel(alpha_s=0.1, beta_s_per_sample=0.001, stem="cifar", eval_s=2.0)
    assert gpu.eval_time_s(1, DeviceKind.GPU) == 2.0 and gpu.eval_time_s(4, DeviceKind.GPU) == 0.5
    # in the engine: a chunk's evaluation on hrfs-lab's CPU workers depends on their cores
    inputs = load_inputs(EXP, ["cluster.path=configs/clusters/hrfs-lab.toml"])
    events = simulate(inputs, inputs.make_strategy("hrfs"), 0).events
    cores = {e["worker"]: e["devices"] for e in events if e["kind"] == "worker_added"}
    evals = {(e["device"], cores[e["worker"]]): e["eval_s"] for e in events if e["kind"] == "chunk" and e["eval_s"]}
    cpu_sizes = {c: v for (d, c), v in evals.items() if d == "cpu"}
    assert len(set(cpu_sizes.values())) == len(cpu_sizes) >= 2, evals
