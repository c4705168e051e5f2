"""The one way of each shared thing (issue 33, items 1-2): enums that keep their strings on disk, one
atomic file replacement, one worker carving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REPO
from hetune.sim.cluster import carve_workers, default_workers, load_cluster
from hetune.sim.enums import DeviceKind, TrialStatus
from hetune.sim.errors import ConfigError, WriteFailed
from hetune.sim.schema import to_mapping
from hetune.sim.tomlfile import atomic_replace


def test_members_read_and_write_as_their_strings():
    assert f"{TrialStatus.PAUSED}" == "paused" and str(DeviceKind.GPU) == "gpu"
    cluster = load_cluster(REPO / "configs/clusters/hrfs-lab.toml")
    kinds = {cluster.device_kind(d) for d in cluster.devices}
    assert kinds == {DeviceKind.GPU, DeviceKind.CPU}
    written = to_mapping(cluster)["devices"]
    assert {type(d["kind"]) for d in written.values()} == {str}  # plain strings back into TOML


def test_a_bad_kind_names_the_file_and_key(tmp_path):
    text = (REPO / "configs/clusters/gavel-12.toml").read_text().replace('kind = "gpu"', 'kind = "tpu"', 1)
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"c\.toml: devices\.\w+\.kind: must be one of 'gpu', 'cpu', got 'tpu'"):
        load_cluster(tmp_path / "c.toml")


def test_carving_by_kind_and_size():
    cluster = load_cluster(REPO / "configs/clusters/hrfs-lab.toml")
    every = default_workers(cluster)
    gpu_only = carve_workers(cluster, kinds=(DeviceKind.GPU,))
    assert gpu_only == [w for w in every if cluster.device_kind(w.device) is DeviceKind.GPU]
    one_core = carve_workers(cluster, cores=lambda node, g: 1, kinds=(DeviceKind.CPU,))
    assert {w.devices for w in one_core} == {1}
    assert len(one_core) == sum(g.cpus * g.count for g in cluster.nodes
                                if cluster.device_kind(g.device) is DeviceKind.CPU)


def test_a_writer_callback_gets_the_mode_a_plain_open_would(tmp_path):
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"x")
    atomic_replace(tmp_path / "cb.bin", lambda tmp: Path(tmp).write_bytes(b"y"))
    assert (tmp_path / "cb.bin").read_bytes() == b"y"
    assert os.stat(tmp_path / "cb.bin").st_mode & 0o777 == os.stat(plain).st_mode & 0o777


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "f.bin"
    atomic_replace(target, b"old")

    def fails(tmp: Path) -> None:
        Path(tmp).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteFailed, match="No space left on device"):
        atomic_replace(target, fails)
    with pytest.raises(KeyError):
        atomic_replace(target, lambda tmp: {}["not an OSError: raised as it is"])
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_one_registered_strategy_is_ray_tunes_own_scheduling():
    from hetune.sim import strategies

    assert strategies.get_class(strategies.ray_native()).ray_native
