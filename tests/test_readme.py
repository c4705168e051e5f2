"""The README's strategy and learning-model examples (and docs/ray.md's Tuner) run as written, and
the README stays a manual."""

from __future__ import annotations

import re

import pytest

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


def test_the_learning_model_example_runs_in_the_simulator(default_experiment):
    from hetune.sim import learning

    section = README[README.index("## The learning model"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    try:
        assert learning.get_class("exp-approach", "test") is namespace["ExponentialApproach"]
        inputs = load_inputs(default_experiment, ['learning.kind="exp-approach"'])
        res = simulate(inputs, inputs.make_strategy("hrfs"), 0)
        accs = [e["accuracy"] for e in res.events if e["kind"] == "chunk" and e["accuracy"] is not None]
        # noise-free and monotone in lr-weighted iterations: every reading lies on its curve
        assert accs and min(accs) > 0.1 and max(accs) < 0.9
    finally:
        learning.REGISTRY.pop("exp-approach", None)


@pytest.mark.slow
@pytest.mark.ray
def test_the_ray_tune_example_runs_as_written(monkeypatch, tmp_path):
    import ray

    # Defined inside the test so that Ray pickles it by value (workers cannot import tests/).
    def my_trainable(config: dict) -> None:
        """A Ray Tune user's function trainable: accuracy grows with lr; a checkpoint every iteration."""
        import json
        import os
        import tempfile

        from ray import tune

        step, acc = 0, 0.0
        ckpt = tune.get_checkpoint()
        if ckpt is not None:
            with ckpt.as_directory() as d, open(os.path.join(d, "s.json")) as fh:
                state = json.load(fh)
            step, acc = state["step"], state["acc"]
        while True:
            step += 1
            acc = min(1.0, acc + config["lr"] / 10)
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "s.json"), "w") as fh:
                    json.dump({"step": step, "acc": acc}, fh)
                tune.report({"accuracy": acc}, checkpoint=tune.Checkpoint.from_directory(d))

    monkeypatch.chdir(REPO)  # the example's config paths are a checkout's
    # the example starts its own Ray: an address another cluster on this host left behind
    # (/tmp/ray/ray_current_cluster) must not make its ray.init() join that one
    monkeypatch.setenv("RAY_ADDRESS", "local")
    ray_doc = (REPO / "docs/ray.md").read_text()
    section = ray_doc[ray_doc.index("**Your own Tuner.**"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("ray.init(", "ray.init(include_dashboard=False, ", 1)
    code = code.replace("run_config=tune.RunConfig(",
                        f"run_config=tune.RunConfig(storage_path={str(tmp_path)!r}, verbose=0, ", 1)
    namespace: dict = {"my_trainable": my_trainable}
    try:
        exec(compile(code, "README.md", "exec"), namespace)
        results, scheduler = namespace["results"], namespace["scheduler"]
        assert len(results) == 4 and all(r.metrics["training_iteration"] == 20 for r in results)
        assert set(scheduler.last_slot.values()) == {0, 1}  # rank-aware used both workers
    finally:
        ray.shutdown()


def test_the_quick_start_prints_what_the_readme_shows(tmp_path, capsys, monkeypatch):
    # Every strategy claim of the Quick start is the output of its command: rerun each one and compare.
    from hetune.cli import main

    monkeypatch.chdir(tmp_path)  # result folders land here, as they would in the user's checkout
    block = re.search(r"## Quick start\n\n```\n(.*?)```", README, re.S).group(1)
    commands = re.split(r"^\$ ", block, flags=re.M)[1:]
    assert len(commands) >= 2
    for chunk in commands:
        command, *shown = chunk.rstrip("\n").split("\n")
        args = command.split()
        assert args[0] == "hetune"
        assert main(args[1:]) == 0
        printed = [line.rstrip() for line in capsys.readouterr().out.strip().splitlines()]
        assert printed == [line.rstrip() for line in shown], command
