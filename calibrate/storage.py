"""Measure the checkpoint storage a run will use: ``hetune calibrate --storage URI``.

A checkpoint-sized folder (one file of the model's checkpoint size and a small ``meta.json``, as the
trainable writes) is copied to the storage and back with the calls Ray Tune 2.60 makes
(``ray/train/_internal/storage.py``: ``pyarrow.fs.copy_files`` in 64 MB chunks, single-threaded
towards S3), a few times; a tiny folder's round trip gives the per-request seconds. The result is
the calibration's ``[storage]`` table (sim/storage.py), measured from this process's host: run it on
a node like those the trials run on.

URIs are pyarrow's (what ``RunConfig.storage_path`` takes): a local path, ``file://``,
``s3://bucket/prefix`` (with ``?endpoint_override=host:port&scheme=http`` for an S3-compatible
server), ... The kind is "s3" for object stores, "shared" where ``shared`` is said, else "local".
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from hetune.real.checkpoint_storage import open_storage
from hetune.sim.storage import StorageModel

CHUNK = 64 * 1024 * 1024  # Ray's chunk size for checkpoint transfers


def _copy(src: str, dst: str, src_fs: Any = None, dst_fs: Any = None) -> float:
    import pyarrow.fs as pafs

    t0 = time.perf_counter()
    threads = not (dst_fs is not None and dst_fs.type_name == "s3")  # as Ray: no threads uploading to S3
    pafs.copy_files(src, dst, source_filesystem=src_fs, destination_filesystem=dst_fs, chunk_size=CHUNK,
                    use_threads=threads)
    return time.perf_counter() - t0


def measure_storage(uri: str, checkpoint_mb: float, repeats: int = 3, shared: bool = False) -> StorageModel:
    """Upload and download a checkpoint-sized folder to ``uri``; return the fitted costs.

    Args:
        uri: the storage (what the experiment's ``real.storage_path`` will name).
        checkpoint_mb: size of the model's checkpoint, MB.
        repeats: transfers of each size; medians are kept.
        shared: the path is a file system every node mounts (NFS): kind "shared".
    """
    fs, base = open_storage(uri)
    kind = "s3" if fs.type_name == "s3" else ("shared" if shared else "local")
    probe = f"{base.rstrip('/')}/hetune-storage-probe-{uuid.uuid4().hex[:8]}"
    times: dict[tuple[str, str], list[float]] = {(size, way): [] for size in ("big", "small") for way in ("up", "down")}
    with tempfile.TemporaryDirectory(prefix="hetune-storage-") as tmp:
        folders = {"big": Path(tmp, "big"), "small": Path(tmp, "small")}
        for size, nbytes in (("big", int(checkpoint_mb * 1e6)), ("small", 1000)):
            folders[size].mkdir()
            (folders[size] / "state.pt").write_bytes(os.urandom(nbytes))
            (folders[size] / "meta.json").write_text('{"save_s": 0.0}')
        try:
            for i in range(repeats):
                for size, folder in folders.items():
                    dst = f"{probe}/{size}-{i}"
                    fs.create_dir(dst)
                    times[size, "up"].append(_copy(str(folder), dst, None, fs))
                    back = Path(tmp, f"back-{size}-{i}")
                    back.mkdir()
                    times[size, "down"].append(_copy(dst, str(back), fs, None))
        finally:
            try:
                fs.delete_dir(probe)
            except OSError:
                pass
    med = {k: statistics.median(v) for k, v in times.items()}
    request_s = min(med["small", "up"], med["small", "down"])
    mb = max(checkpoint_mb, 1e-6)
    upload = mb / max(med["big", "up"] - request_s, 1e-6)
    download = mb / max(med["big", "down"] - request_s, 1e-6) if kind == "s3" else 0.0
    return StorageModel(kind=kind, upload_mb_s=round(upload, 3), download_mb_s=round(download, 3),  # type: ignore[arg-type]
                        request_s=round(request_s, 6), uri=_shown(uri))


def _shown(uri: str) -> str:
    """The URI as provenance: a local path becomes its last two parts (no build host's path in a file)."""
    if "://" in uri:
        return uri
    parts = Path(uri).expanduser().resolve().parts
    return "/".join(parts[-2:])
