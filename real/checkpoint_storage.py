"""Tune's checkpoint storage as a run names it (``real.storage_path``): reached, joined, refused.

Ray Tune 2.60 takes a local folder or a URI that pyarrow reads (``s3://bucket/prefix``, with
``?endpoint_override=host:port&scheme=http`` for an S3-compatible server on another endpoint); every
node must reach it. What is checked here is what fails before any trial starts otherwise: an endpoint
that refuses, a bucket that is not there, a local folder that cannot be created or written.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hetune.sim.errors import ConfigError


def open_storage(uri: str, where: str = "--storage") -> tuple[Any, str]:
    """(pyarrow filesystem, path on it) of ``uri``; ConfigError in one line where it cannot be reached."""
    import pyarrow.fs as pafs

    parts = urlsplit(uri)
    if parts.scheme in ("s3", "gs", "gcs") and not parts.netloc:  # checked before any connection is tried
        raise ConfigError(where, "", f"checkpoint storage {uri!r} names no bucket ({parts.scheme}://BUCKET/PREFIX)")
    try:
        _endpoint_answers(uri)
        fs, path = pafs.FileSystem.from_uri(uri if "://" in uri else str(Path(uri).expanduser().resolve()))
        fs.get_file_info(path)  # an S3 endpoint that refuses: fails here
        if fs.type_name == "s3" and fs.get_file_info(path.split("/")[0]).type == pafs.FileType.NotFound:
            raise OSError(f"bucket {path.split('/')[0]!r} not found")
    except (OSError, ValueError) as exc:
        raise ConfigError(where, "", f"cannot reach checkpoint storage {uri!r}: {str(exc).splitlines()[0]}") from None
    return fs, path


def _endpoint_answers(uri: str) -> None:
    """An ``endpoint_override`` that refuses connections fails here at once (the S3 client would retry
    for seconds first); OSError otherwise as the client would raise it."""
    query = parse_qs(urlsplit(uri).query)
    if "endpoint_override" in query:
        host, sep, port = query["endpoint_override"][0].rpartition(":")
        if not sep:  # "host" alone: the scheme's port
            host, port = port, ""
        default = 443 if query.get("scheme", ["https"])[0] == "https" else 80
        with socket.create_connection((host, int(port) if port.isdigit() else default), timeout=5):
            pass


def _local_folder_usable(folder: Path, where: str) -> None:
    """A local storage folder Tune can create and write: its nearest existing ancestor is a folder
    this process may write into (Tune fails with a traceback otherwise, after the run folder exists)."""
    import os

    there = folder
    while not there.exists() and there != there.parent:
        there = there.parent
    why = ("is not a folder" if not there.is_dir() else
           "is not writable" if not os.access(there, os.W_OK | os.X_OK) else "")
    if not why:
        # os.access says yes to root everywhere (/proc included): write and remove a probe file to know
        try:
            fd, probe = tempfile.mkstemp(prefix=".hetune-probe-", dir=there)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            why = f"takes no file ({exc.strerror or exc})"
    if why:
        raise ConfigError(where, "", f"cannot use {str(folder)!r} as checkpoint storage: {str(there)!r} {why}")


def storage_join(storage: str, name: str) -> str:
    """``storage``/``name``, before a URI's query (``s3://b/p?endpoint_override=...``)."""
    base, sep, query = storage.partition("?")
    return f"{base.rstrip('/')}/{name}{sep}{query}"


def run_storage_path(storage_path: str, out: Path) -> str:
    """Tune's storage_path for this run: ``out``/tune unless the experiment names one; a URI that
    cannot be reached (an S3 endpoint that refuses, a missing bucket) is refused in one line."""
    if not storage_path:
        return str(out / "tune")
    if "://" not in storage_path:
        folder = Path(storage_path).expanduser().resolve()
        _local_folder_usable(folder, "real.storage_path")
        return str(folder)
    open_storage(storage_path, "real.storage_path")
    return storage_path
