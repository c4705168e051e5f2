"""A write that fails (disk full, permission denied) keeps the previous file and names it (issue
"Reliability", item 4)."""

from __future__ import annotations

import errno
import os

from hetune.cli import main


def test_disk_full_keeps_the_previous_sweep_and_says_which_file(tmp_path, capsys, monkeypatch, default_experiment):
    out = tmp_path / "s"
    args = ["sweep", str(default_experiment), "--strategies", "tune-default", "--seeds", "2", "--jobs", "1",
            "--out", str(out), "--quiet"]
    assert main(args) == 0
    before = (out / "sweep.csv").read_bytes()
    capsys.readouterr()

    real_fsync = os.fsync

    def full(fd):  # a filesystem stub: every data flush fails as on a full disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    # resuming with one more seed: the new cell's write fails
    code = main(["sweep", str(default_experiment), "--strategies", "tune-default", "--seeds", "3", "--jobs", "1",
                 "--out", str(out), "--quiet", "--resume"])
    monkeypatch.setattr(os, "fsync", real_fsync)
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot write" in err and "No space left on device" in err and "is intact" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (out / "sweep.csv").read_bytes() == before  # the old file is intact
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temp file left behind
