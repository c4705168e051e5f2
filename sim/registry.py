"""Name registries of plug-ins (strategies, learning models): classes that register themselves by name."""

from __future__ import annotations

from typing import Any, TypeVar

C = TypeVar("C", bound=type)


def add(registry: dict[str, Any], cls: C, what: str) -> C:
    """Add ``cls`` to ``registry`` under ``cls.name`` and return it (a class decorator's body).

    Raises:
        ValueError: the name is empty or taken (a programming error, not input).
    """
    name = getattr(cls, "name", "")  # every plug-in base class declares ``name: ClassVar[str]``
    if not name or name in registry:
        raise ValueError(f"{what} name {name!r} is empty or taken")
    registry[name] = cls
    return cls
