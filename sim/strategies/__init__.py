"""Strategy registry: each strategy is one module that registers itself by name."""

from __future__ import annotations

from typing import Any, Mapping

from hetune.sim.errors import ConfigError
from hetune.sim.registry import add
from hetune.sim.schema import from_mapping
from hetune.sim.strategies.base import Strategy

__all__ = ["REGISTRY", "Strategy", "create", "get_class", "names", "parse_params", "register"]

REGISTRY: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator adding a strategy to the registry under ``cls.name``."""
    return add(REGISTRY, cls, "strategy")


def names() -> list[str]:
    """Registered strategy names, sorted."""
    return sorted(REGISTRY)


def parse_params(name: str, table: Mapping[str, Any] | None, where: str) -> Any:
    """Validate a strategy's parameter table against its Params dataclass."""
    cls = get_class(name, where)
    if cls.Params is None:
        if table:
            raise ConfigError(where, f"strategies.{name}", "this strategy takes no parameters")
        return None
    return from_mapping(cls.Params, table or {}, where, f"strategies.{name}")


def get_class(name: str, where: str = "--strategy") -> type[Strategy]:
    """Look up a strategy class or raise ConfigError listing the known names."""
    if name not in REGISTRY:
        from hetune.sim import plugins  # an installed package's entry point, looked up only when needed

        plugins.from_entry_points("strategy", name)
    if name not in REGISTRY:
        raise ConfigError(where, "", f"unknown strategy {name!r} (known: {', '.join(names())})")
    return REGISTRY[name]


def ray_native() -> str:
    """The name of the registered strategy that is Ray Tune's own PBT scheduling (``ray_native``)."""
    native = [n for n in names() if REGISTRY[n].ray_native]
    if len(native) != 1:  # a programming error: exactly one strategy models plain Ray Tune
        raise ValueError(f"expected one ray_native strategy, found {native}")
    return native[0]


def create(name: str, params: Any) -> Strategy:
    """A fresh strategy instance (strategies hold per-run state)."""
    return get_class(name)(params)


# Importing the modules registers them.
from hetune.sim.strategies import (  # noqa: E402,F401
    hrfs, leader_fusion, random_search, rank_aware, throughput_proportional, tune_default)
