"""Ray Tune settings an experiment file can say (issue "Your own code and Ray Tune's vocabulary", item 3):
a fixed initial configuration, integer choices kept as integers, reuse_actors stated."""

from __future__ import annotations

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def test_every_trial_starts_from_the_fixed_configuration_and_explore_moves_it_on():
    inputs = load_inputs(EXP, ["pbt.initial_config.lr=0.0001"])
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    starts = [e["config"] for e in events if e["kind"] == "trial_start"]
    assert len(starts) == 20 and {c["lr"] for c in starts} == {0.0001}
    assert len({c["momentum"] for c in starts}) > 1  # the others are still drawn
    explored = {e["new_config"]["lr"] for e in events if e["kind"] == "explore"}
    assert explored - {0.0001}


def test_integer_choices_stay_integers_through_sampling_and_explore():
    inputs = load_inputs(EXP, ['pbt.mutations.width={kind="choice", values=[1, 2, 4]}'])
    events = simulate(inputs, inputs.make_strategy("hrfs"), 0).events
    values = [e["config"]["width"] for e in events if e["kind"] == "trial_start"]
    values += [e["new_config"]["width"] for e in events if e["kind"] == "explore"]
    assert values and all(type(v) is int for v in values)


@pytest.mark.parametrize("sets, needle", [
    (["real.reuse_actors=true"], "real.reuse_actors: hetune models Ray Tune 2.60's default, off"),
    (["pbt.initial_config.width=3"], "pbt.initial_config.width: not a mutated hyperparameter"),
])
def test_what_hetune_does_not_model_is_refused_in_one_line(tmp_path, capsys, sets, needle):
    args = ["simulate", "--out", str(tmp_path / "r")]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_a_dataset_is_needed_only_where_the_network_trains(tmp_path, capsys):
    import tomllib

    import tomli_w

    raw = tomllib.loads((REPO / "configs/experiments/smoke-local.toml").read_text())
    del raw["experiment"]["dataset"]
    raw["cluster"]["path"] = str(REPO / "configs/clusters/local.toml")
    raw["calibration"]["path"] = str(REPO / "configs/calibration/local.toml")
    raw["learning"] = {"kind": "nqm"}
    exp = tmp_path / "nodata.toml"
    exp.write_text(tomli_w.dumps(raw))
    assert main(["simulate", str(exp), "--set", 'real.trainable="model"', "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["simulate", str(exp), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "experiment.dataset: required: the network trains on it" in err[0]
    assert not (tmp_path / "b").exists()


def test_accuracy_minimised_is_refused_in_one_line(tmp_path, capsys):
    assert main(["simulate", str(EXP), "--set", 'pbt.mode="min"', "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pbt.mode: accuracy is maximised" in err[0] and not (tmp_path / "r").exists()
