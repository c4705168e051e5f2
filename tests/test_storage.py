"""Checkpoints through storage (issue "Fidelity you can audit", item 4): the simulator charges an
upload on every save and, from an object store, a download on every restore; calibrate measures the
storage; a run refuses storage it cannot reach before anything starts.

The last test is a real run whose checkpoints travel through an S3 server on loopback.
"""

from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w

from conftest import REPO
from hetune.calibrate.storage import measure_storage
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.events import read_events
from hetune.sim.loader import load_inputs
from hetune.sim.storage import StorageModel
from hetune.sim.view_log import VIEWS_FILE

S3 = {"kind": "s3", "upload_mb_s": 125.0, "download_mb_s": 250.0, "request_s": 0.5}  # 125 MB: 1.5 s up, 1.0 s down


def _with_storage(setup, storage):
    exp = setup(population=4, stop=100, interval=50, ckpt=25,
                nodes=[{"name": "n0", "device": "fast", "gpus": 1, "cpus": 8},
                       {"name": "n1", "device": "slow", "gpus": 1, "cpus": 8}])
    if storage:
        calib = tomllib.loads((exp.parent / "calib.toml").read_text())
        (exp.parent / "calib.toml").write_text(tomli_w.dumps(dict(calib, storage=storage)))
    inputs = load_inputs(exp)
    return simulate(inputs, inputs.make_strategy("rank-aware"), 0).events


def test_every_save_uploads_and_every_restore_downloads_from_an_object_store(setup):
    events = _with_storage(setup, S3)
    saves = [e for e in events if e["kind"] == "checkpoint"]
    assert saves and all(e["upload_s"] == pytest.approx(1.5) and e["duration_s"] == pytest.approx(1.0 + 1.5)
                         for e in saves)  # save_s 1.0 (conftest's FAST and SLOW) + the upload
    resumes = [e for e in events if e["kind"] == "resume"]
    # from storage wherever the trial restarts, its own node included (no node-to-node copy any more)
    assert resumes and all(e["copy_s"] == pytest.approx(1.0) for e in resumes)
    same_node = [e for e in resumes if e["node"] == "n0"]
    assert same_node


def test_without_a_storage_model_the_older_charges_stand_and_storage_changes_the_outcome(setup, tmp_path):
    plain = _with_storage(setup, None)
    assert all("upload_s" not in e and e["duration_s"] == 1.0 for e in plain if e["kind"] == "checkpoint")
    slow = _with_storage(setup, dict(S3, upload_mb_s=12.5, download_mb_s=25.0))  # 10 s up, 5.5 s down
    assert max(e["t"] for e in slow) > max(e["t"] for e in plain) + 10  # the storage is felt in the makespan


def test_a_file_system_storage_is_read_in_place():
    local = StorageModel(kind="local", upload_mb_s=500.0, request_s=0.01)
    assert local.upload_s(50.0) == pytest.approx(0.11) and local.download_s(50.0) == 0.0


@pytest.mark.parametrize("bad, key", [({"upload_mb_s": 0.0}, "upload_mb_s"), ({"download_mb_s": 0.0}, "download_mb_s"),
                                      ({"request_s": -1.0}, "request_s"), ({"kind": "tape"}, "kind")])
def test_a_bad_storage_table_is_refused_in_one_line(setup, capsys, bad, key):
    exp = setup()
    calib = tomllib.loads((exp.parent / "calib.toml").read_text())
    (exp.parent / "calib.toml").write_text(tomli_w.dumps(dict(calib, storage=dict(S3, **bad))))
    assert main(["simulate", str(exp), "--strategy", "hrfs", "--out", str(exp.parent / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"storage.{key}" in err[0] and "calib.toml" in err[0], err
    assert not (exp.parent / "r").exists()


def test_calibrate_measures_a_folder_and_an_s3_server(tmp_path, s3_storage):
    local = measure_storage(str(tmp_path / "store"), 5.0, repeats=2)
    assert local.kind == "local" and local.upload_mb_s > 0 and local.download_mb_s == 0
    assert local.uri.endswith("/store") and not local.uri.startswith("/")  # no build host's path in a file
    s3 = measure_storage(s3_storage, 5.0, repeats=2)
    assert s3.kind == "s3" and s3.upload_mb_s > 0 and s3.download_mb_s > 0 and s3.request_s > 0


def test_a_run_refuses_storage_it_cannot_reach_before_anything_starts(tmp_path, capsys, s3_storage):
    smoke = REPO / "configs/experiments/smoke-local.toml"
    refused = s3_storage.replace("s3://hetune/", "s3://no-such-bucket/")
    closed = s3_storage.split("?")[0] + "?endpoint_override=127.0.0.1:1&scheme=http"
    for uri, needle in ((refused, "bucket 'no-such-bucket' not found"), (closed, "Connection refused")):
        out = tmp_path / "run"
        assert main(["validate", str(smoke), "--strategy", "hrfs", "--out", str(out), "--quiet",
                     "--set", f'real.storage_path="{uri}"']) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "real.storage_path" in err[0] and needle in err[0], err
        assert not out.exists()
    cal = tmp_path / "cal.toml"  # calibrate refuses it before measuring anything
    assert main(["calibrate", "--out", str(cal), "--quiet", "--storage", closed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--storage: cannot reach checkpoint storage" in err[0] and not cal.exists(), err


def test_a_local_storage_folder_that_cannot_be_written_is_refused_before_anything_starts(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "run"
    assert main(["validate", str(REPO / "configs/experiments/smoke-local.toml"), "--strategy", "hrfs", "--out",
                 str(out), "--quiet", "--set", f'real.storage_path="{tmp_path / "a-file" / "tune"}"']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "real.storage_path" in err[0] and "is not a folder" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("storage, needle", [
    ("/proc/hetune-x", "cannot use '/proc/hetune-x' as checkpoint storage"),  # root may "write" there: probed
    ("s3://", "names no bucket"),
    ("s3:///prefix", "names no bucket"),
])
def test_storage_that_takes_no_file_or_names_no_bucket_is_refused_before_any_connection(tmp_path, capsys,
                                                                                        storage, needle):
    out = tmp_path / "run"
    assert main(["validate", str(REPO / "configs/experiments/smoke-local.toml"), "--strategy", "hrfs", "--out",
                 str(out), "--quiet", "--set", f'real.storage_path="{storage}"']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "real.storage_path" in err[0] and needle in err[0], err
    assert not out.exists()


SMOKE = REPO / "configs/experiments/smoke-local.toml"
# 3 trials on 2 one-core slots, 10 iterations at batch 4, a save and a perturbation every 5
SHORT = ["--quiet", "--set", "experiment.population=3", "--set", "experiment.stop_iterations=10",
         "--set", "experiment.checkpoint_interval=5", "--set", "pbt.perturbation_interval=5",
         "--set", "experiment.batch_size=4"]


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.torch
def test_ray_pbt_with_checkpoints_through_s3(tmp_path, s3_storage, capsys):
    """Ray's own PBT, its storage_path an S3 server on loopback: every save is uploaded there and
    every restore downloaded, so checkpoints travel; compare sets the measured transfers against
    the simulator's, from a calibration whose [storage] was measured against that server."""
    import boto3
    from dataclasses import asdict

    calib = tomllib.loads((REPO / "configs/calibration/local.toml").read_text())
    mb = calib["models"]["resnet18"]["cpu-fast"]["checkpoint_mb"]
    calib["storage"] = asdict(measure_storage(s3_storage, mb, repeats=2))
    (tmp_path / "calib.toml").write_text(tomli_w.dumps(calib))
    out = tmp_path / "plain"
    storage = ["--set", f'real.storage_path="{s3_storage}"', "--set", f'calibration.path="{tmp_path / "calib.toml"}"']
    # 3 trials on 2 slots: Ray's PBT pauses a trial at iteration 5 for the one waiting, which later
    # restores from storage
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--plain", "--out", str(out), *SHORT,
                 *storage]) == 0
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2}
    assert not (out / VIEWS_FILE).exists()  # Ray's own PBT asks no strategy
    assert not (out / "tune").exists()  # nothing kept in the run folder: Tune's storage is the server
    endpoint = "http://" + s3_storage.split("endpoint_override=")[1].split("&")[0]
    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=endpoint).list_objects_v2(Bucket="hetune")["Contents"]]
    assert any("/checkpoint_" in k and k.endswith("state.pt") for k in keys)
    assert all(e["upload_s"] > 0 for e in events if e["kind"] == "checkpoint")  # every save went up
    restores = [e for e in events if e["kind"] == "resume"]
    assert restores and all(e["copy_s"] > 0 for e in restores), restores  # downloaded before each restore
    assert main(["compare", str(out)]) == 0
    x = json.loads((out / "fidelity.json").read_text())["checkpoint_transfers"]
    assert x["storage"] == "s3" and x["real"]["uploads"] > 0 and x["sim"]["uploads"] > 0
    assert x["real"]["download_s"] > 0 and x["sim"]["download_s"] > 0
    assert "checkpoint transfers (s3): upload per save real" in capsys.readouterr().out
