"""A run's frozen inputs: the experiment, cluster and calibration it is judged with, kept in its folder.

A real run is judged against the simulator long after it ran, often on another machine. If the
judgement read the files the experiment names (``configs/...``), a calibration or curve refit made in
between would silently change the verdict, and a run folder copied to another clone would name
paths that do not exist there. So every run folder (``validate`` writes it before Ray starts;
``simulate`` and ``sweep`` too) holds a snapshot:

- ``config.toml``: the resolved experiment, its ``cluster.path`` and ``calibration.path`` naming
  the two files beside it (relative paths resolve against the folder, so it loads from any clone);
- ``cluster.toml`` and ``calibration.toml`` (the calibration carries the fitted learning curves);
- ``inputs.json``: the sha256 of each of those three files, ``inputs_hash`` (one hash of what the
  run is judged with, apart from its strategy and seed: the benchmark key that says two runs were
  judged by the same model), the code version that wrote it, and how it was frozen.

``hetune compare`` loads only the snapshot, after checking each file against its recorded hash; a
missing file or a changed one is refused, never replaced by a shipped file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from hetune.sim import plugins
from hetune.sim.errors import ConfigError
from hetune.sim.loader import RunInputs, load_inputs
from hetune.sim.schema import to_mapping
from hetune.sim.tomlfile import atomic_write_json, atomic_write_toml

SNAPSHOT_FILES = ("config.toml", "cluster.toml", "calibration.toml")
MANIFEST = "inputs.json"
_REPO = Path(__file__).resolve().parents[1]  # sim/ sits at the top of the source tree


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """hetune's version, with the git commit of the source tree when it is a checkout
    (``0.1.0+g<12 hex>``, ``.dirty`` when tracked files differ from it); the version alone otherwise."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        base = version("hetune")
    except PackageNotFoundError:
        base = "unknown"
    try:
        commit = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return base
    return f"{base}+g{commit}" + (".dirty" if dirty else "") if commit else base


def _hashed(inputs: RunInputs) -> dict[str, Any]:
    """What ``inputs_hash`` hashes: everything a run is judged with except its strategy and seed: the experiment
    (without where its cluster and calibration files lie), the cluster and the calibration.

    Runs of one benchmark share it; a refit curve, a new calibration or a changed experiment
    gives another. Computed from the loaded configs, so the user's files and the snapshot of them
    hash alike.
    """
    exp = to_mapping(inputs.experiment)
    for key in ("cluster", "calibration", "strategy"):
        exp.pop(key, None)
    exp.get("experiment", {}).pop("seed", None)
    # Fields added after runs were committed hash as before where they hold their defaults, so that
    # those runs keep their inputs_hash: learning.path (always "" once loaded: the loader inlines the
    # file it names) and a device model's spreads and per-batch parallel fractions at their defaults
    # (none measured).
    learning = exp.get("learning", {})
    exp.pop("plugins", None)  # recorded apart, by name and source sha256 (inputs.json "plugins")
    if exp.get("pbt", {}).get("initial_config") == {}:  # came later: hashes as before at its default
        exp["pbt"].pop("initial_config")
    if exp.get("real", {}).get("reuse_actors") is False:
        exp["real"].pop("reuse_actors")
    added: tuple[tuple[str, Any], ...] = (("path", ""), ("uncertainty", {}), ("draws", True), ("draw", -1))
    for key, default in added:
        if key in learning and learning[key] == default:
            learning.pop(key)  # learning.uncertainty, draws and draw came with the skills model's fits
    calibration = to_mapping(inputs.calibration)
    for rows in calibration.get("models", {}).values():
        for row in rows.values():
            for key, default in (("step_cv", 0.0), ("overhead_cv", 0.0), ("drift_cv", 0.0), ("step_cv_batch", {}),
                                 ("parallel_fraction_batch", {})):
                if row.get(key) == default:
                    row.pop(key)
    return {"experiment": exp, "cluster": to_mapping(inputs.cluster), "calibration": calibration}


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def inputs_hash(inputs: RunInputs) -> str:
    """sha256 (hex) of everything a run is judged with except its strategy and seed (see ``_hashed``)."""
    return _digest(_hashed(inputs))


# Keys that came after some runs were frozen but *before* others that hashed them at their defaults:
# a run frozen before they came hashed without them, so its recorded hash is one of these older forms
# (real.trainable and real.model_sleep came with the model trainable, fb23db3 of 2026-12-06: the
# fidelity runs of results/fidelity/{idle,scaling-at-batch,under-load} are older).
_OLDER_FORMS: tuple[tuple[tuple[str, str, Any], ...], ...] = (
    (("real", "trainable", "network"), ("real", "model_sleep", 1.0)),
)


def recorded_hashes(inputs: RunInputs) -> list[str]:
    """Every hash a run frozen with these inputs may have recorded: today's first, then each older form's."""
    out = [inputs_hash(inputs)]
    for form in _OLDER_FORMS:
        data = _hashed(inputs)
        if all(data["experiment"].get(table, {}).get(key) == default for table, key, default in form):
            for table, key, _ in form:
                data["experiment"][table].pop(key)
            out.append(_digest(data))
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot_config(inputs: RunInputs, strategy: str, seed: int) -> dict[str, Any]:
    """The resolved experiment with the run's strategy and seed, naming the snapshot's own files."""
    data = inputs.resolved()
    data["strategy"] = {"name": strategy}
    data["experiment"]["seed"] = seed
    data["cluster"] = {"path": "cluster.toml"}
    data["calibration"] = {"path": "calibration.toml"}
    # plug-ins by name, never by path: a run folder loads from any clone, its plug-ins from --plugin or imports
    data["plugins"] = {"modules": sorted(plugins.LOADED)} if plugins.LOADED else {"modules": []}
    return data


def write_snapshot(folder: Path, inputs: RunInputs, strategy: str, seed: int,
                   frozen: str = "before the run started") -> dict[str, Any]:
    """Write the four snapshot files into ``folder`` (created) and return the manifest.

    Args:
        folder: the run (or sweep) folder.
        inputs: what the run uses.
        strategy: the strategy's name ("sweep" for a sweep folder).
        seed: the run's seed.
        frozen: when the snapshot was taken, recorded in the manifest.
    """
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_toml(folder / "cluster.toml", to_mapping(inputs.cluster))
    atomic_write_toml(folder / "calibration.toml", to_mapping(inputs.calibration))
    atomic_write_toml(folder / "config.toml", snapshot_config(inputs, strategy, seed))
    return write_manifest(folder, inputs_hash(inputs), frozen, code_version())


def write_manifest(folder: Path, judged_hash: str, frozen: str, code: str) -> dict[str, Any]:
    """inputs.json for the three snapshot files as they are in ``folder`` now."""
    manifest = {"files": {name: _sha256(folder / name) for name in SNAPSHOT_FILES},
                "inputs_hash": judged_hash, "code_version": code, "frozen": frozen}
    if plugins.LOADED:  # each plug-in's source, so that compare refuses one that changed
        manifest["plugins"] = {name: p.sha256 for name, p in sorted(plugins.LOADED.items())}
    atomic_write_json(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: Path) -> dict[str, Any]:
    """The snapshot's manifest after checking each file against its hash.

    Raises:
        ConfigError: the manifest or a snapshot file is missing, unreadable, or changed since it was
            frozen (names the file).
    """
    where = folder / MANIFEST
    try:
        manifest = json.loads(where.read_text())
    except FileNotFoundError:
        raise ConfigError(str(where), "", "missing: this run folder holds no frozen inputs to judge it with "
                          "(written by hetune validate before a run starts)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(str(where), "", f"unreadable: {exc}") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not isinstance(manifest.get("inputs_hash"), str):
        raise ConfigError(str(where), "files", "not a snapshot manifest (needs files and inputs_hash)")
    for name in SNAPSHOT_FILES:
        path = folder / name
        if not isinstance(files.get(name), str):
            raise ConfigError(str(where), f"files.{name}", "missing: the manifest records no hash for it")
        if not path.is_file():
            raise ConfigError(str(path), "", "missing: a frozen input of this run is gone")
        if _sha256(path) != files[name]:
            raise ConfigError(str(path), "", f"changed since the run froze it (sha256 {_sha256(path)[:12]}, "
                              f"recorded {files[name][:12]} in {MANIFEST})")
    return manifest


def load_snapshot(folder: Path, overrides: list[str] | None = None) -> tuple[RunInputs, dict[str, Any]]:
    """The run's frozen inputs (checked against their hashes), with ``--set`` overrides applied,
    and its manifest."""
    manifest = read_manifest(folder)
    inputs = load_inputs(folder / "config.toml")
    # Each file matches its own sha, but inputs.json could have been edited with them: the hash of
    # what the files hold must be the one recorded (tamper-evident, not tamper-proof: an edit that
    # rewrites the recorded hash too passes).
    if manifest["inputs_hash"] not in recorded_hashes(inputs):
        raise ConfigError(str(folder / MANIFEST), "inputs_hash", f"does not match the frozen files (they hash to "
                          f"{inputs_hash(inputs)[:12]}, recorded {manifest['inputs_hash'][:12]}): the snapshot "
                          "was edited after it was frozen")
    if overrides:
        inputs = load_inputs(folder / "config.toml", overrides)
    plugins.check_recorded(manifest.get("plugins") or {}, str(folder / MANIFEST))
    return inputs, manifest


def version_note(manifest: dict[str, Any]) -> str | None:
    """One line when the snapshot was written by another code version than this one; else None."""
    theirs, ours = manifest.get("code_version"), code_version()
    if not isinstance(theirs, str) or theirs == ours:
        return None
    if theirs.startswith("unknown"):
        return f"the run recorded no code version (its inputs were frozen after it ran); judged by hetune {ours}"
    return f"the run was recorded by hetune {theirs} and is judged by hetune {ours}"
