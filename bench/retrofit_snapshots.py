"""Make result folders committed before inputs were frozen (sim/snapshot.py) judgeable from any clone.

    python bench/retrofit_snapshots.py [results]     # idempotent

What it does, and what it cannot do:
1. Every text file under the folder loses the build host's checkout prefix (``/work/main/``), so
   paths read relative to the repository (logs included: Ray's own lines name the run folders).
2. A run folder (config.toml with cluster.toml and calibration.toml beside it) gets its
   ``cluster.path`` and ``calibration.path`` pointed at those files, and an ``inputs.json`` with their
   hashes. Those files were written when the run ended, not before it started, and the manifest
   says so ("retrofitted"): in results/fidelity/under-load they show that the benchmark's runs held
   three different calibrations, because the curves were refit while it ran.
3. A sweep folder (config.toml alone) gets paths relative to it, naming the shipped files; a sweep
   written by hetune now freezes its own copies instead.
4. Both record ``[learning] kind = "bell"``: they were made before the learning model was a choice,
   with the bell curve, and a config without the key now means the noisy quadratic model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST_PREFIX = "/work/main/"  # the build host's checkout, where the committed runs were made
TEXT = {".toml", ".json", ".jsonl", ".log", ".md", ".txt", ".csv"}
RETROFIT = ("retrofitted on 2026-12-06 from the files the run folder held, which were written when the run "
            "ended, not before it started")


def strip_host_paths(root: Path) -> int:
    """Remove the build host's checkout prefix from every text file under ``root``; files changed."""
    changed = 0
    for f in sorted(root.rglob("*")):
        if not f.is_file() or f.suffix not in TEXT:
            continue
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        if HOST_PREFIX in text:
            f.write_text(text.replace(HOST_PREFIX, ""))
            changed += 1
    return changed


def retrofit_run(folder: Path) -> str:
    from hetune.sim.loader import load_inputs
    from hetune.sim.snapshot import MANIFEST, inputs_hash, write_manifest
    from hetune.sim.tomlfile import atomic_write_toml, read_toml

    if (folder / MANIFEST).is_file():
        return "has a snapshot"
    cfg = read_toml(folder / "config.toml")
    cfg.setdefault("learning", {"kind": "bell"})
    cfg["cluster"] = {"path": "cluster.toml"}
    cfg["calibration"] = {"path": "calibration.toml"}
    atomic_write_toml(folder / "config.toml", cfg)
    judged = inputs_hash(load_inputs(folder / "config.toml"))
    write_manifest(folder, judged, RETROFIT, "unknown (recorded before hetune froze a run's inputs)")
    return f"retrofitted (inputs hash {judged[:12]})"


def retrofit_sweep(folder: Path) -> str:
    from hetune.sim.tomlfile import atomic_write_toml, read_toml

    cfg = read_toml(folder / "config.toml")
    cfg.setdefault("learning", {"kind": "bell"})
    for section in ("cluster", "calibration"):
        path = cfg.get(section, {}).get("path", "")
        if path and not Path(path).is_absolute() and not (folder / path).is_file():
            target = REPO / path  # written repository-relative by step 1
            cfg[section]["path"] = os.path.relpath(target, folder)
    atomic_write_toml(folder / "config.toml", cfg)
    return "paths relative to the folder"


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results"
    print(f"{strip_host_paths(root)} file(s) lost the build host's path prefix")
    for cfg in sorted(root.rglob("config.toml")):
        folder = cfg.parent
        if (folder / "cluster.toml").is_file() and (folder / "calibration.toml").is_file():
            print(f"{folder.relative_to(root)}: {retrofit_run(folder)}")
        elif not (folder / "inputs.json").is_file():
            print(f"{folder.relative_to(root)}: {retrofit_sweep(folder)}")


if __name__ == "__main__":
    main()
