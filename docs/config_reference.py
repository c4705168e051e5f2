"""docs/config.md from the config classes: every key of the experiment, cluster and calibration files.

For each dataclass field: its dotted key, type, default, the range its ``check()`` enforces (the
constant part of each message ``check()`` yields for that key, read from the source) and its meaning
(the field's line under ``Args:`` in the class docstring). A field without a meaning is an error,
so a new key cannot ship undocumented (tests/test_docs.py).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing
from typing import Any, Iterator

_MISSING = dataclasses.MISSING


class Undocumented(Exception):
    """A config field has no line under ``Args:`` in its class docstring."""


def _args(cls: type) -> dict[str, str]:
    """Field name -> description, from the ``Args:`` section of ``cls``'s docstring."""
    doc = inspect.getdoc(cls) or ""
    out: dict[str, str] = {}
    if "Args:" not in doc:
        return out
    current = None
    for line in doc.split("Args:", 1)[1].splitlines():
        m = re.match(r"^    (\w+): (.*)$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.startswith("        "):
            out[current] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return out


def _ranges(cls: type) -> dict[str, list[str]]:
    """Field name -> what ``cls.check()`` requires of it (the constant text of its messages)."""
    try:
        src = textwrap.dedent(inspect.getsource(cls.check))  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        return {}
    out: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Yield) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            key, msg = node.value.elts
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            text = ""
            if isinstance(msg, ast.Constant) and isinstance(msg.value, str):
                text = msg.value
            elif isinstance(msg, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "…" for v in msg.values)
            text = re.split(r", got|\(got", text)[0].strip().rstrip(",;")
            if text:
                out.setdefault(key.value, []).append(text)
    return out


def _type_name(tp: Any) -> str:
    """The loader's own wording of a type (what its error messages say), with containers spelled out."""
    from hetune.sim.schema import type_name

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict:
        return f"table of {_type_name(args[1])}" if args else "table"
    if origin in (tuple, list):
        return f"array of {_type_name(args[0])}" if args else "array"
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    return type_name(tp)


def _default(f: dataclasses.Field) -> str:
    if f.default is not _MISSING:
        v = f.default
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, tuple):
            return "[" + ", ".join(str(x) for x in v) + "]"
        return str(v)
    if f.default_factory is not _MISSING:  # type: ignore[misc]
        made = f.default_factory()  # type: ignore[misc]
        return "(empty)" if made in ({}, [], ()) else "(table)"
    return "required"


def rows(cls: type, prefix: str = "") -> Iterator[tuple[str, str, str, str, str]]:
    """(key, type, default, range, meaning) for every field of ``cls``, nested tables expanded."""
    hints = typing.get_type_hints(cls)
    described, ranges = _args(cls), _ranges(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        if f.name not in described:
            raise Undocumented(f"{cls.__module__}.{cls.__qualname__}.{f.name} ({key}) has no line under Args:")
        tp = hints[f.name]
        yield key, _type_name(tp), _default(f), "; ".join(ranges.get(f.name, [])), described[f.name]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            yield from rows(tp, f"{key}.")
        elif origin is dict and args and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
            yield from rows(args[1], f"{key}.<name>.")
        elif origin is dict and args and typing.get_origin(args[1]) is dict:
            inner = typing.get_args(args[1])[1]
            if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                yield from rows(inner, f"{key}.<name>.<name>.")
        elif origin in (tuple, list) and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            yield from rows(args[0], f"{key}[].")


def _table(cls: type, prefix: str = "") -> str:
    out = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for key, tp, default, allowed, meaning in rows(cls, prefix):
        out.append(f"| `{key}` | {tp} | {default} | {allowed.replace('|', '/')} | {meaning.replace('|', '/')} |")
    return "\n".join(out)


def config_md() -> str:
    """The whole of docs/config.md."""
    from hetune.adapt.scenario import Scenario
    from hetune.sim.cluster import ClusterConfig
    from hetune.sim.config import ExperimentConfig
    from hetune.sim.throughput import CalibrationConfig

    return "\n".join([
        "# Configuration files: every key",
        "",
        "Generated from the config classes by `python docs/generate.py` (do not edit by hand;",
        "`tests/test_docs.py` fails when this page is stale or a key has no description). \"allowed\" is what",
        "the loader checks beyond the type; a value outside it is refused in one line naming the file and",
        "key (exit status 2). `<name>` stands for a name you choose (a device type, a strategy, a model).",
        "",
        "## Experiment file (`configs/experiments/*.toml`)",
        "",
        _table(ExperimentConfig),
        "",
        "`strategies.<name>` tables are checked by each strategy's own parameters (README, Strategies), and",
        "`learning.params` by a user's learning model's `Params`.",
        "",
        "## Cluster file (`configs/clusters/*.toml`)",
        "",
        _table(ClusterConfig),
        "",
        "## Calibration file (`configs/calibration/*.toml`, written by `hetune calibrate`)",
        "",
        _table(CalibrationConfig),
        "",
        "## Adaptation scenario file (`[adapt]`, read by `hetune adapt`)",
        "",
        "A scenario file holds only an `[adapt]` table (`configs/adapt/*.toml`); `changes` is an array of",
        "`{time, change}` tables.",
        "",
        _table(Scenario, "adapt."),
        "",
    ])
