"""Strict conversion of parsed TOML tables into frozen dataclasses.

Every field is checked against its type hint (a Literal or an Enum of strings
takes one of its strings; an Enum field holds the member); unknown keys, wrong types and
missing required keys raise ConfigError naming the file and the dotted key.
Value constraints live in each dataclass's ``check()`` method, which returns
(key, message) pairs for impossible values.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from enum import Enum
from typing import Any, Literal, Mapping, TypeVar, get_args, get_origin, get_type_hints

from hetune.sim.errors import ConfigError

T = TypeVar("T")

# TOML integers are 64-bit; larger ones (which Python parses happily) overflow numpy and Ray.
INT_LIMIT = 2**63 - 1

_MISSING = dataclasses.MISSING


def _join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def type_name(tp: Any) -> str:
    """A type as messages name it: 'one of ...' for a Literal or enum, 'a table', 'int', ..."""
    origin = get_origin(tp)
    if origin is Literal:
        # "" is the left-out value of an optional Literal (experiment.dataset): not a choice to offer
        return "one of " + ", ".join(repr(a) for a in get_args(tp) if a != "")
    if _is_enum(tp):  # worded as the Literal it replaced: one of 'gpu', 'cpu'
        return "one of " + ", ".join(repr(m.value) for m in tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    if dataclasses.is_dataclass(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Enum)


def convert(tp: Any, value: Any, where: str, key: str) -> Any:
    """Convert a parsed TOML value to type ``tp`` or raise ConfigError.

    Args:
        tp: the target type hint.
        value: the parsed TOML value.
        where: file name for messages.
        key: dotted key of the value, for messages.
    """
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(where, key, f"must be {type_name(tp)}, got {value!r}")
        return value
    if _is_enum(tp):  # a field typed DeviceKind, say: the file holds the member's string
        if value not in [m.value for m in tp]:
            raise ConfigError(where, key, f"must be {type_name(tp)}, got {value!r}")
        return tp(value)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        if len(args) == 2 and type(None) in args:  # X | None: X's own error names the key at fault
            return convert(next(a for a in args if a is not type(None)), value, where, key)
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, where, key)
            except ConfigError as exc:
                errors.append(exc)
        raise ConfigError(where, key, f"must be {type_name(tp)}, got {value!r}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(where, key, f"must be a table, got {value!r}")
        return from_mapping(tp, value, where, key)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(where, key, f"must be an array, got {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [convert(item_tp, v, where, _join(key, i)) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(where, key, f"must be a table, got {value!r}")
        _, val_tp = get_args(tp)
        return {str(k): convert(val_tp, v, where, _join(key, str(k))) for k, v in value.items()}
    if tp in (bool, int, float, str):
        return _scalar(tp, value, where, key)
    raise TypeError(f"schema type {tp!r} is not supported")  # programming error, not input


def _scalar(tp: type, value: Any, where: str, key: str) -> Any:
    """``value`` as a bool, int (64-bit), finite float or str, or ConfigError naming ``key``."""
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(where, key, f"must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(where, key, f"must be an integer, got {value!r}")
        if abs(value) > INT_LIMIT:
            raise ConfigError(where, key, f"must fit in 64 bits, got {value}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(where, key, f"must be a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(where, key, f"must be a finite number, got {value!r}")
        return number
    if not isinstance(value, str):
        raise ConfigError(where, key, f"must be a string, got {value!r}")
    return value


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str, prefix: str = "") -> T:
    """Build dataclass ``cls`` from a TOML table, strictly.

    Args:
        cls: a dataclass type whose fields carry type hints.
        data: the table.
        where: file name for messages.
        prefix: dotted key of the table inside the file.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(where, prefix, f"must be a table, got {data!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for k in data:
        if k not in fields:
            allowed = ", ".join(sorted(fields))
            raise ConfigError(where, _join(prefix, k), f"unknown key (allowed here: {allowed})")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = convert(hints[name], data[name], where, _join(prefix, name))
        elif f.default is _MISSING and f.default_factory is _MISSING:
            raise ConfigError(where, _join(prefix, name), "missing required key")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        for key, message in check():
            raise ConfigError(where, _join(prefix, key), message)
    return obj


def to_mapping(obj: Any) -> Any:
    """Turn a (nested) dataclass into plain TOML-ready data, dropping None values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = to_mapping(getattr(obj, f.name))
            if v is not None:
                out[f.name] = v
        return out
    if isinstance(obj, Enum):  # back to the plain string the file held
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): to_mapping(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [to_mapping(v) for v in obj]
    return obj
