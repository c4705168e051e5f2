"""Load an experiment with its cluster and calibration into one validated bundle."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hetune.sim import plugins, strategies
from hetune.sim.cluster import ClusterConfig, load_cluster
from hetune.sim.config import ExperimentConfig
from hetune.sim.errors import ConfigError, one_line
from hetune.sim.faults import check_faults
from hetune.sim.nqm import NQMParams
from hetune.sim.schema import from_mapping, to_mapping
from hetune.sim.throughput import CalibrationConfig, load_calibration
from hetune.sim.tomlfile import apply_overrides, read_toml


@dataclass(frozen=True)
class RunInputs:
    """Everything a run needs, validated.

    Args:
        experiment: the experiment config (paths made absolute).
        cluster: the cluster it names.
        calibration: the calibration it names.
        source: the experiment file.
    """

    experiment: ExperimentConfig
    cluster: ClusterConfig
    calibration: CalibrationConfig
    source: str

    def strategy_params(self, name: str) -> Any:
        """Validated parameters of strategy ``name`` from [strategies.<name>]."""
        return strategies.parse_params(name, self.experiment.strategies.get(name), self.source)

    def make_strategy(self, name: str) -> strategies.Strategy:
        """A fresh instance of strategy ``name`` with its validated [strategies.<name>] parameters."""
        return strategies.create(name, self.strategy_params(name))

    def make_learning_model(self) -> Any:
        """The experiment's learning model (``[learning]``, sim/learning.py) at its batch. For the
        "bell" kind, curves fitted from real runs (calibration ``[curves.<model>]``) beat the
        experiment's ``[surrogate]`` guess."""
        from hetune.sim import learning

        exp = self.experiment
        info = exp.experiment
        bell = self.calibration.curves.get(info.model, exp.surrogate).at_batch(info.batch_size)
        return learning.create(exp.learning, bell, info.batch_size, info.eval_samples, self.source)

    def resolved(self) -> dict[str, Any]:
        """The fully resolved experiment as TOML-ready data."""
        return to_mapping(self.experiment)


def _resolve(path: str, base: Path) -> str:
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def load_inputs(path: str | Path, overrides: list[str] | None = None) -> RunInputs:
    """Load an experiment file, apply ``--set`` overrides, and load what it names.

    Args:
        path: the experiment TOML file.
        overrides: ``dotted.key=value`` strings.
    """
    where = str(path)
    raw = read_toml(path)
    base = Path(path).resolve().parent
    # Paths written in the file are relative to it; paths given with --set to the cwd.
    for section in ("cluster", "calibration", "learning"):
        sec = raw.get(section)
        if isinstance(sec, dict) and isinstance(sec.get("path"), str) and sec["path"]:  # "" names no file
            sec["path"] = _resolve(sec["path"], base)
    plug = raw.get("plugins")
    if isinstance(plug, dict) and isinstance(plug.get("modules"), list):  # paths in the file: relative to it
        plug["modules"] = [_resolve(m, base) if isinstance(m, str) and plugins.looks_like_path(m) else m
                           for m in plug["modules"]]
    raw = apply_overrides(raw, overrides or [])
    _import_plugins(raw.get("plugins"), where)  # before the names they register are checked
    try:
        exp = from_mapping(ExperimentConfig, raw, where)
    except ConfigError as exc:
        raise _blame_override(exc, overrides or []) from None
    for section in ("cluster", "calibration"):
        named = getattr(exp, section).path
        if not Path(named).is_file():  # name the key that points at nothing, not only the path
            raise ConfigError(where, f"{section}.path", f"{named} is not a file")
    if exp.learning.path and _kind_set_apart(exp.learning.path, overrides or []):
        exp = replace(exp, learning=replace(exp.learning, path=""))  # --set learning.kind wins, as --set does
    if exp.learning.path:
        if not Path(exp.learning.path).is_file():
            raise ConfigError(where, "learning.path", f"{exp.learning.path} is not a file")
        # the file's parameters replace the experiment's, inline: a snapshot of these inputs then
        # holds them and names no file outside it
        named = exp.learning.path
        fields = load_learning_file(named)
        if "params" in fields:  # the experiment's own [learning.params] (and --set) override the file's
            fields["params"] = {**fields["params"], **exp.learning.params}
        exp = replace(exp, learning=replace(exp.learning, **fields, path=""))
        for key, message in exp.learning.check():  # the file's tables against the experiment's settings
            raise ConfigError(named, f"learning.{key}", message)
    cluster = load_cluster(exp.cluster.path)
    calibration = load_calibration(exp.calibration.path)
    for name in exp.strategies:
        strategies.parse_params(name, exp.strategies[name], where)
    strategies.get_class(exp.strategy.name, f"{where}: strategy.name")
    model = exp.experiment.model
    if model not in calibration.models:
        raise ConfigError(exp.calibration.path, f"models.{model}",
                          f"no calibration for model {model!r} named by {where}")
    calibration.check_network(model, exp.experiment.stem, exp.calibration.path, where)
    for device in sorted({n.device for n in cluster.nodes}):
        if device not in calibration.models[model]:
            raise ConfigError(exp.calibration.path, f"models.{model}.{device}",
                              f"no calibration for device type {device!r} of cluster {exp.cluster.path}")
    check_faults(exp.faults, cluster, where)
    return RunInputs(exp, cluster, calibration, where)


def _kind_set_apart(path: str, overrides: list[str]) -> bool:
    """Whether ``--set learning.kind=...`` names another model than the learning file at ``path`` holds
    (the file is then not loaded: the user asked for another model)."""
    kinds = [o.split("=", 1)[1].strip().strip("'\"") for o in overrides
             if "=" in o and o.split("=", 1)[0].strip() == "learning.kind"]
    if not kinds or not Path(path).is_file():
        return False
    try:
        file_kind = str(read_toml(path).get("learning", {}).get("kind", ""))
    except ConfigError:
        return False  # the file's own error is reported where it is loaded
    return bool(file_kind) and kinds[-1] != file_kind


def _blame_override(exc: ConfigError, overrides: list[str]) -> ConfigError:
    """``exc`` naming the ``--set`` that put the bad value there, not the experiment file it went into."""
    for text in reversed(overrides):
        key = text.split("=", 1)[0].strip()
        if exc.key and (exc.key == key or exc.key.startswith(key + ".") or key.startswith(exc.key + ".")):
            return ConfigError(f"--set {one_line(text)}", exc.key, exc.message)
    return exc


def _import_plugins(table: Any, where: str) -> None:
    modules = table.get("modules", []) if isinstance(table, dict) else []
    if not isinstance(modules, list) or not all(isinstance(m, str) and m for m in modules):
        raise ConfigError(where, "plugins.modules", "must be a list of module names or paths")
    for spec in modules:
        plugins.load(spec, where)


def load_learning_file(path: str | Path) -> dict[str, Any]:
    """What a learning file sets in ``[learning]``: ``nqm`` from its ``[learning.nqm]``, or, from a file of
    ``kind = "skills"``, the kind, ``params`` and ``uncertainty``; checked like an experiment's."""
    data = read_toml(path)
    learning = data.get("learning")
    if isinstance(learning, dict) and learning.get("kind") == "skills":
        from hetune.sim.skills import SkillsParams

        params = learning.get("params")
        if not isinstance(params, dict):
            raise ConfigError(str(path), "learning.params", "missing: a skills learning file holds [learning.params]")
        from_mapping(SkillsParams, params, str(path), "learning.params")  # checked here, used as a table
        uncertainty = learning.get("uncertainty", {})
        if not isinstance(uncertainty, dict):
            raise ConfigError(str(path), "learning.uncertainty", "must be a table")
        return {"kind": "skills", "params": params, "uncertainty": uncertainty}
    table = learning.get("nqm") if isinstance(learning, dict) else None
    if table is None:
        raise ConfigError(str(path), "learning.nqm", "missing: a learning file holds [learning.nqm] "
                                                     "(written by hetune calibrate curves --kind nqm), or "
                                                     "kind = \"skills\" and [learning.params] (--kind skills)")
    return {"nqm": from_mapping(NQMParams, table, str(path), "learning.nqm")}  # checked as it is built
