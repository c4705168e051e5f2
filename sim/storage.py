"""Where Ray Tune keeps checkpoints, and what moving one there and back costs (the simulator's model).

Ray Tune 2.60 copies every save of a trial to ``RunConfig.storage_path`` as soon as the trainable
has written it (``StorageContext.persist_current_checkpoint``, in the trial's process: the trial waits),
and a restore reads the checkpoint from there: in place where the storage is a file system
(``Checkpoint.as_directory`` hands over the path), after a download into a temporary folder where it
is an object store. Storage must be reachable from every node (``ray/train/_internal/storage.py``
refuses a head-local path for a trial on another node), so a checkpoint never travels node to node:
it goes up after each save and, from an object store, comes down before each restore, wherever the
trial runs next.

A calibration's ``[storage]`` table (``hetune calibrate --storage URI``, calibrate/storage.py) gives the
simulator these costs; without one it keeps its older model, which charges a node-to-node copy only
when a trial resumes on another node than the one holding its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Literal


@dataclass(frozen=True)
class StorageModel:
    """Measured costs of the experiment's checkpoint storage.

    Args:
        kind: "local" (a folder on the driver's host: one-node clusters, or emulated ones), "shared" (a
            file system every node mounts, e.g. NFS) or "s3" (an S3-compatible object store).
        upload_mb_s: MB/s at which a save is copied to the storage.
        download_mb_s: MB/s at which a restore copies it back (an object store only; 0 for a file
            system, read in place by the trainable's load).
        request_s: seconds each upload or download pays whatever its size (connections, listing, the
            small files beside the weights).
        uri: the storage it was measured against (provenance; the simulator does not read it).
    """

    kind: Literal["local", "shared", "s3"]
    upload_mb_s: float
    download_mb_s: float = 0.0
    request_s: float = 0.0
    uri: str = ""

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.upload_mb_s > 0:
            yield "upload_mb_s", f"must be > 0, got {self.upload_mb_s}"
        if self.kind == "s3" and not self.download_mb_s > 0:
            yield "download_mb_s", f"must be > 0 for an object store (kind = \"s3\"), got {self.download_mb_s}"
        if self.download_mb_s < 0:
            yield "download_mb_s", f"must be >= 0, got {self.download_mb_s}"
        if self.request_s < 0:
            yield "request_s", f"must be >= 0, got {self.request_s}"

    def upload_s(self, mb: float) -> float:
        """Seconds to copy a checkpoint of ``mb`` MB to the storage after a save."""
        return self.request_s + mb / self.upload_mb_s

    def download_s(self, mb: float) -> float:
        """Seconds to bring a checkpoint of ``mb`` MB back for a restore (0 where it is read in place)."""
        if self.kind != "s3":
            return 0.0
        return self.request_s + mb / self.download_mb_s
