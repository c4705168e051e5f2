"""The README's strategy example runs as written, and the README stays a manual."""

from __future__ import annotations

import re

from conftest import REPO
from hetune.sim import strategies
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

README = (REPO / "README.md").read_text()


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_the_strategy_example_runs_in_the_simulator(default_experiment):
    section = README[README.index("## Adding a strategy"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    cls = namespace["MostProgressedFirst"]
    try:
        assert strategies.get_class("most-progressed-first") is cls
        inputs = load_inputs(default_experiment)
        res = simulate(inputs, cls(), 0)
        assert all(t.status == "stopped" for t in res.trials)
        # chunks end at perturbation points: every chunk but a trial's last (target or stop) is one interval
        chunks = [e for e in res.events if e["kind"] == "chunk"]
        assert chunks and all(e["iterations"] <= inputs.experiment.pbt.perturbation_interval for e in chunks)
    finally:
        strategies.REGISTRY.pop("most-progressed-first", None)
