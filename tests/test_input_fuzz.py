"""No traceback from any input: generated config documents and --set values are accepted or refused in one line.

Each test starts from a shipped, valid config, applies a few random edits (new or existing keys set to
wrong types, NaN, inf, huge or negative numbers, strings, empty or deeply nested tables, or deleted),
and runs the subcommand in process. simulate and sweep run what they accept under a small size limit;
validate, calibrate and adapt stop just before Ray or training would start (a patched entry point).
"""

from __future__ import annotations

import json
import math
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import REPO
from hetune.cli import main

pytestmark = pytest.mark.slow

CONFIGS = REPO / "configs"
EXAMPLES = 400  # per test; five tests: 2,000 generated inputs
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
NUMBERS = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 7, 50, 2**31, 2**63 - 1, 2**63, 10**22]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 1e-300, 1e308, -1e308, math.nan, math.inf, -math.inf]),
)
SCALARS = st.one_of(NUMBERS, st.booleans(), st.text(alphabet="abcXYZ019 ./-_", max_size=10),
                    st.sampled_from(["resnet18", "cifar10", "gpu", "cpu", "v100", "tune-default", "max"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(KEYS, inner, max_size=3)), max_leaves=8)


def like(original: Any) -> st.SearchStrategy[Any]:
    """Values of the original's type, often near it: what a user's typo or a bad range looks like."""
    if isinstance(original, bool):
        return st.booleans()
    if isinstance(original, int):
        span = 3 * abs(original) + 3
        return st.one_of(st.integers(-span, span), st.sampled_from([0, -1, original * 1000, 2**62]), NUMBERS)
    if isinstance(original, float) and not math.isfinite(original):  # an earlier edit made it nan or inf
        return NUMBERS
    if isinstance(original, float):
        span = min(3 * abs(original) + 3.0, 1e300)
        return st.one_of(st.floats(-span, span), st.floats(0.0, 1.0), NUMBERS)
    if isinstance(original, list) and original:
        return st.lists(like(original[0]), max_size=4)
    return VALUES


def inline(value: Any) -> str:
    """A TOML inline value (TOML has no null; everything else round-trips)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {inline(v)}" for k, v in value.items()) + "}"


def dump(doc: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {inline(v)}\n" for k, v in doc.items())


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a parsed document (tables and array items included)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, prefix + (i,))
    return out


@st.composite
def edited(draw, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with one or two random edits: set an existing or new key to anything, or delete one."""
    doc = json.loads(json.dumps(base))  # a deep copy (the shipped configs hold no floats JSON cannot carry)
    for _ in range(draw(st.integers(1, 2))):
        where = paths(doc)
        path = draw(st.sampled_from(where)) if where else ()
        parent: Any = doc
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(["set", "set", "set", "new", "delete"]))
        if op == "new" and isinstance(parent, dict):
            parent[draw(KEYS)] = draw(VALUES)
        elif op == "delete" and isinstance(parent, dict) and path:
            parent.pop(path[-1])
        elif path:
            old = parent[path[-1]]
            parent[path[-1]] = draw(st.one_of(like(old), VALUES) if not isinstance(old, (dict, str)) else VALUES)
    return doc


def base(relpath: str) -> dict[str, Any]:
    return tomllib.loads((CONFIGS / relpath).read_text())


SMALL_EXP = base("experiments/pbt-resnet18-cifar10.toml")
SMALL_EXP["experiment"].update(population=6, stop_iterations=200)  # fast to run when accepted
SMALL_EXP["cluster"]["path"] = str(CONFIGS / "clusters/gavel-12.toml")
SMALL_EXP["calibration"]["path"] = str(CONFIGS / "calibration/reference.toml")


class Accepted(Exception):
    """Raised where Ray or training would start: the input passed every check."""


def _stop(*args: Any, **kwargs: Any) -> None:
    raise Accepted


def run(argv: list[str], files: list[Path], capsys) -> None:
    """Run the CLI; it must succeed, reach the patched start, or refuse in one line naming an input."""
    capsys.readouterr()
    try:
        code = main(argv)
    except Accepted:
        return
    err = capsys.readouterr().err.strip()
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(err.splitlines()) == 1 and err.startswith("hetune: error: "), err
        named = [str(f) for f in files] + ["--set", "--out", "--max-events", "--strategy", "--cluster", "--data-dir"]
        assert any(n in err for n in named), err


def write(folder: Path, name: str, doc: dict[str, Any]) -> Path:
    path = folder / name
    path.write_text(dump(doc))
    return path


def fresh() -> Path:
    return Path(tempfile.mkdtemp(prefix="fuzz-"))


@FUZZ
@given(doc=edited(SMALL_EXP))
def test_experiment_documents(doc, capsys):
    d = fresh()
    exp = write(d, "exp.toml", doc)
    run(["simulate", str(exp), "--out", str(d / "run"), "--max-events", "20000"], [exp], capsys)


CLUSTER = base("clusters/gavel-12.toml")


@FUZZ
@given(doc=edited(CLUSTER))
def test_cluster_documents(doc, capsys):
    d = fresh()
    cluster = write(d, "cluster.toml", doc)
    exp = write(d, "exp.toml", dict(SMALL_EXP, cluster={"path": str(cluster)}))
    run(["sweep", str(exp), "--seeds", "1", "--strategies", "hrfs,leader-fusion", "--jobs", "1", "--quiet",
         "--out", str(d / "sweep"), "--max-events", "20000"], [exp, cluster], capsys)


CALIBRATION = base("calibration/reference.toml")


@FUZZ
@given(doc=edited({"models": {"resnet18": CALIBRATION["models"]["resnet18"]},
                   "provenance": CALIBRATION["provenance"]}))
def test_calibration_documents(doc, capsys):
    d = fresh()
    cal = write(d, "calibration.toml", doc)
    exp = write(d, "exp.toml", dict(SMALL_EXP, calibration={"path": str(cal)}))
    run(["simulate", str(exp), "--out", str(d / "run"), "--max-events", "20000"], [exp, cal], capsys)


SET_KEYS = sorted({".".join(map(str, p)) for p in paths(SMALL_EXP) if all(isinstance(k, str) for k in p)})


def _leaf(key: str) -> Any:
    node: Any = SMALL_EXP
    for k in key.split("."):
        node = node[k]
    return node


@st.composite
def override(draw) -> str:
    """One --set argument: a known key with a value like its own, anything, or text; or an unknown key."""
    key = draw(st.one_of(st.sampled_from(SET_KEYS), st.sampled_from(SET_KEYS), KEYS.map(lambda k: f"pbt.{k}")))
    known = key in SET_KEYS and not isinstance(_leaf(key), (dict, str))
    value = draw(st.one_of(like(_leaf(key)).map(inline), VALUES.map(inline), st.text(max_size=12)) if known
                 else st.one_of(VALUES.map(inline), st.text(max_size=12)))
    return f"{key}={value}"


@FUZZ
@given(overrides=st.lists(override(), min_size=1, max_size=2))
@example(overrides=["experiment.model=\r"])  # found by CI: a carriage return split the error line
@example(overrides=["experiment.name=a\nb", "strategy.name=\x1b[31m"])
def test_set_values(overrides, capsys):
    d = fresh()
    exp = write(d, "exp.toml", SMALL_EXP)
    sets = [a for o in overrides for a in ("--set", o)]
    run(["simulate", str(exp), "--out", str(d / "run"), "--max-events", "20000", *sets], [exp], capsys)


SCENARIO = base("adapt/adapt-convnet-early.toml")


@FUZZ
@given(exp_doc=edited(dict(SMALL_EXP, real={"synthetic": True})), cluster_doc=edited(base("clusters/local.toml")),
       scenario_doc=edited(SCENARIO))
def test_real_commands_check_before_starting(exp_doc, cluster_doc, scenario_doc, capsys, monkeypatch):
    import hetune.adapt.clock
    import hetune.calibrate.runner
    import hetune.real.cifar
    import hetune.real.validate

    monkeypatch.setattr(hetune.real.validate, "_start_ray", _stop)
    monkeypatch.setattr(hetune.real.cifar, "write_synthetic", _stop)
    monkeypatch.setattr(hetune.calibrate.runner, "_connect", _stop)
    monkeypatch.setattr(hetune.adapt.clock, "measure_clock", _stop)
    d = fresh()
    exp_doc = dict(exp_doc, cluster={"path": str(CONFIGS / "clusters/local.toml")},
                   calibration={"path": str(CONFIGS / "calibration/local.toml")})
    exp = write(d, "exp.toml", exp_doc)
    run(["validate", str(exp), "--strategy", "tune-default", "--out", str(d / "real")], [exp], capsys)
    cluster = write(d, "cluster.toml", cluster_doc)
    run(["calibrate", "--cluster", str(cluster), "--out", str(d / "cal.toml")], [cluster], capsys)
    scenario = write(d, "scenario.toml", scenario_doc)
    run(["adapt", "clock", str(scenario), "--out", str(d / "clock.json")], [scenario], capsys)
