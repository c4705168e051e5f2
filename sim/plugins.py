"""Your own strategies and learning models, from your own modules: loaded, recorded and checked.

A plug-in is a module that registers strategies (``hetune.sim.strategies.register``) or learning models
(``hetune.sim.learning.register``) when imported. It is named by an importable module name or by a path
(a ``.py`` file, or a package folder), in an experiment's ``[plugins] modules`` (paths relative to the
experiment file) or with ``--plugin`` on any command that reads an experiment; an installed package may
instead declare entry points in the groups ``hetune.strategies`` and ``hetune.learning_models``, loaded
only when a name is not registered. A module is imported once per process, under its own name (a file's
stem), so that Ray workers import it by the same name (validate ships plug-ins in the job's runtime_env).

Every run folder records the plug-ins it ran with, by name and sha256 of their source (every ``.py``
file of a package); ``compare`` loads them by name (``[plugins]`` or ``--plugin``), never from the
recorded path, and refuses one that is missing or changed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from hetune.sim.errors import ConfigError

GROUPS = {"strategy": "hetune.strategies", "learning model": "hetune.learning_models"}


@dataclass(frozen=True)
class Plugin:
    """A loaded plug-in module: its name, where its source lies, and the sha256 of that source."""

    name: str
    path: str
    sha256: str


LOADED: dict[str, Plugin] = {}  # every plug-in this process imported, by module name


@dataclass(frozen=True)
class PluginsConfig:
    """The experiment's ``[plugins]`` table.

    Args:
        modules: plug-in modules imported before anything else is read: module names, or paths to a .py
            file or a package folder (relative to the experiment file).
    """

    modules: list[str] = field(default_factory=list)


def looks_like_path(spec: str) -> bool:
    """Whether ``spec`` names a file or folder rather than an importable module."""
    return spec.endswith(".py") or "/" in spec or spec.startswith(".")


def load(spec: str, where: str, key: str = "plugins.modules") -> Plugin:
    """Import the plug-in ``spec`` (a module name or a path) once; ConfigError in one line naming it."""
    path = Path(spec).expanduser() if looks_like_path(spec) else None
    name = (path.stem if path.suffix == ".py" else path.name) if path is not None else spec
    if name in LOADED:
        return LOADED[name]
    try:
        if path is not None:
            module = _import_path(path.resolve(), name)
        else:
            module = sys.modules.get(name) or importlib.import_module(name)
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        if path is not None or exc.name != name:
            raise ConfigError(where, key, f"plug-in {spec!r} failed to import: {exc}") from None
        raise ConfigError(where, key, f"plug-in {name!r} is not importable here: pass --plugin with its file or "
                                      "folder, or install it") from None
    except BaseException as exc:  # a user's module: whatever it raises is reported in one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        sys.modules.pop(name, None)
        raise ConfigError(where, key, f"plug-in {spec!r} failed to import: {type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    plugin = Plugin(name, source_of(module), source_sha256(module))
    LOADED[name] = plugin
    return plugin


def _import_path(path: Path, name: str) -> ModuleType:
    if not path.exists():
        raise ConfigError(str(path), "", "no such plug-in file or folder")
    init = path / "__init__.py" if path.is_dir() else path
    if path.is_dir() and not init.is_file():
        raise ConfigError(str(path), "", "a plug-in folder must be a package (holding __init__.py)")
    if name in sys.modules:
        return sys.modules[name]
    kwargs = {"submodule_search_locations": [str(path)]} if path.is_dir() else {}
    spec = importlib.util.spec_from_file_location(name, init, **kwargs)  # type: ignore[arg-type]
    if spec is None or spec.loader is None:
        raise ConfigError(str(path), "", "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered first, as import does, so that its own imports and pickling find it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def source_of(module: ModuleType) -> str:
    """The file (or package folder) a module was imported from; "" if none."""
    file = getattr(module, "__file__", None)
    if not file:
        return ""
    p = Path(file).resolve()
    return str(p.parent) if p.name == "__init__.py" else str(p)


def source_sha256(module: ModuleType) -> str:
    """sha256 over a module's source: its file, or every .py file of its package in path order."""
    src = source_of(module)
    if not src:
        return ""
    p = Path(src)
    files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def from_entry_points(what: str, name: str) -> bool:
    """Load the installed entry point ``name`` of ``what``'s group (a strategy or a learning model);
    whether one was found. Its module is recorded as a plug-in."""
    try:
        found = [ep for ep in importlib.metadata.entry_points(group=GROUPS[what]) if ep.name == name]
    except Exception:  # a broken installed distribution: as if there were none
        return False
    for ep in found:
        load(ep.module, f"entry point {ep.value!r}", f"{GROUPS[what]}.{name}")
        return True
    return False


def check_recorded(recorded: dict[str, str], where: str) -> None:
    """ConfigError naming the first plug-in of a run folder that is not loaded now, or not as it was."""
    for name, sha in sorted(recorded.items()):
        now = LOADED.get(name)
        if now is None:
            raise ConfigError(where, f"plugins.{name}", f"the run used plug-in {name!r}, not loaded now: pass "
                                                         f"--plugin with its file, or make it importable")
        if now.sha256 != sha:
            raise ConfigError(where, f"plugins.{name}", f"plug-in {name!r} ({now.path}) changed since the run "
                                                         f"froze it (sha256 {now.sha256[:12]}, recorded {sha[:12]})")
