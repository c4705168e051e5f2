"""Frozen inputs: a run folder holds what it is judged with, checked by hash, loadable from any clone."""

from __future__ import annotations

import json
import shutil
import tomllib

import pytest

from conftest import REPO, bench_module, write_setup
from hetune.cli import main
from hetune.sim.loader import load_inputs
from hetune.sim.snapshot import MANIFEST, SNAPSHOT_FILES, inputs_hash, load_snapshot, read_manifest


@pytest.fixture()
def run(tmp_path):
    """A simulated run of a small experiment whose shipped files live in tmp_path/src (a stand-in
    for a real run: compare treats both alike)."""
    (tmp_path / "src").mkdir()
    exp = write_setup(tmp_path / "src", population=4, stop=100, interval=50, ckpt=50, target=0.5, noise=0.01)
    out = tmp_path / "run"
    assert main(["simulate", str(exp), "--strategy", "hrfs", "--seed", "2", "--out", str(out)]) == 0
    return exp, out


def test_a_run_folder_holds_its_inputs_and_loads_them_from_anywhere(run, tmp_path):
    exp, out = run
    cfg = tomllib.loads((out / "config.toml").read_text())
    assert cfg["cluster"]["path"] == "cluster.toml" and cfg["calibration"]["path"] == "calibration.toml"
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["files"]) == set(SNAPSHOT_FILES) and manifest["code_version"].startswith("0.1.0")
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(out, moved)
    shutil.rmtree(tmp_path / "src")  # the files the experiment named are gone: the snapshot suffices
    inputs, m = load_snapshot(moved)
    assert m["inputs_hash"] == inputs_hash(inputs) == manifest["inputs_hash"]
    assert inputs.experiment.strategy.name == "hrfs" and inputs.experiment.experiment.seed == 2


def test_the_hash_ignores_strategy_and_seed_but_not_the_model(run):
    exp, out = run
    base = inputs_hash(load_inputs(exp))
    assert inputs_hash(load_inputs(exp, ["experiment.seed=9", "strategy.name=hrfs"])) == base
    assert inputs_hash(load_inputs(exp, ["surrogate.tau_iterations=77"])) != base
    assert inputs_hash(load_inputs(exp, ["experiment.population=5"])) != base


def test_compare_judges_with_the_snapshot_never_the_shipped_files(run, capsys):
    exp, out = run
    assert main(["compare", str(out)]) == 0
    first = json.loads((out / "fidelity.json").read_text())
    assert "judged with the run's frozen inputs" in capsys.readouterr().out
    # the shipped calibration changes after the run: the verdict does not
    cal = exp.parent / "calib.toml"
    cal.write_text(cal.read_text().replace("alpha_s = 0.5", "alpha_s = 5.0"))
    assert main(["compare", str(out)]) == 0
    again = json.loads((out / "fidelity.json").read_text())
    assert again["makespan_s"] == first["makespan_s"] and again["inputs"] == first["inputs"]
    assert first["inputs"]["inputs_hash"] == first["inputs"]["frozen_hash"] and first["inputs"]["overrides"] == []
    # judging under the changed calibration is asked for by name, and recorded with its hash
    assert main(["compare", str(out), "--set", f"calibration.path={cal}"]) == 0
    other = json.loads((out / "fidelity.json").read_text())
    assert other["inputs"]["inputs_hash"] != other["inputs"]["frozen_hash"]
    assert other["makespan_s"]["sim"] > first["makespan_s"]["sim"]
    assert "--set calibration.path=" in capsys.readouterr().out


@pytest.mark.parametrize("damage, named", [("edit", "cluster.toml"), ("remove", "calibration.toml"),
                                           ("remove", MANIFEST), ("garble", MANIFEST)])
def test_a_missing_or_changed_snapshot_is_refused_in_one_line(run, capsys, damage, named):
    _, out = run
    target = out / named
    if damage == "edit":
        target.write_text(target.read_text() + "\n# edited\n")
    elif damage == "remove":
        target.unlink()
    else:
        target.write_text("{not json")
    assert main(["compare", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0]
    assert not (out / "fidelity.json").exists()


@pytest.mark.parametrize("edit", ["zeroed hash", "config and its sha"])
def test_an_edited_manifest_is_refused_naming_it(run, capsys, edit):
    import hashlib

    _, out = run
    m = json.loads((out / MANIFEST).read_text())
    if edit == "zeroed hash":
        m["inputs_hash"] = "0" * 64
    else:  # another experiment behind the same recorded hash: each file's sha rewritten to match
        cfg = out / "config.toml"
        cfg.write_text(cfg.read_text().replace("population = 4", "population = 3"))
        m["files"]["config.toml"] = hashlib.sha256(cfg.read_bytes()).hexdigest()
    (out / MANIFEST).write_text(json.dumps(m))
    assert main(["compare", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and MANIFEST in err[0] and "inputs_hash" in err[0]
    assert not (out / "fidelity.json").exists()


def test_a_run_of_another_code_version_is_compared_with_a_note(run, capsys):
    _, out = run
    m = json.loads((out / MANIFEST).read_text())
    m["code_version"] = "0.0.9+gdeadbeef0000"
    (out / MANIFEST).write_text(json.dumps(m))
    assert main(["compare", str(out)]) == 0
    text = capsys.readouterr().out
    assert "recorded by hetune 0.0.9+gdeadbeef0000 and is judged by hetune" in text


def test_a_sweep_resumes_only_with_the_inputs_it_was_made_with(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    exp = write_setup(tmp_path / "src", population=4, stop=100, interval=50, ckpt=50)
    out = tmp_path / "sw"
    args = ["sweep", str(exp), "--strategies", "hrfs", "--seeds", "2", "--jobs", "1", "--out", str(out), "--quiet"]
    assert main(args) == 0
    read_manifest(out)  # the sweep froze its inputs too
    assert main(args + ["--resume"]) == 0
    assert main(args + ["--resume", "--set", "experiment.population=3"]) == 2
    assert "made with other inputs" in capsys.readouterr().err


def test_every_committed_run_folder_can_be_judged_from_any_clone():
    # No committed result names a path of the machine that made it, and every run folder's
    # snapshot matches its hashes (bench/retrofit_snapshots.py made the older ones so).
    # (a run is a folder of events with the experiment it ran; bench_digits' training logs name only a batch)
    runs = [p.parent for p in (REPO / "results").rglob("events.jsonl") if (p.parent / "config.toml").is_file()
            and "cluster" in tomllib.loads((p.parent / "config.toml").read_text())]
    assert runs
    for folder in runs:
        load_snapshot(folder)  # every file's sha and the recorded inputs_hash (older forms included)
        cfg = tomllib.loads((folder / "config.toml").read_text())
        assert cfg["cluster"]["path"] == "cluster.toml", folder
    for f in (REPO / "results").rglob("*"):
        if f.suffix in (".toml", ".json", ".md") and f.is_file():
            assert str(REPO) + "/" not in f.read_text(), f


def test_the_fidelity_table_refuses_runs_of_different_inputs(tmp_path, monkeypatch, capsys):
    bench_fidelity = bench_module("bench_fidelity")
    monkeypatch.setattr(bench_fidelity, "OUT", tmp_path)
    same = {"a-s0": {"inputs": {"inputs_hash": "1" * 64}}, "b-s0": {"inputs": {"inputs_hash": "1" * 64}}}
    assert bench_fidelity.benchmark_inputs(same) == "1" * 64
    for mixed in ({**same, "c-s1": {"inputs": {"inputs_hash": "2" * 64}}}, {**same, "old-s0": {}}):
        with pytest.raises(SystemExit) as exc:
            bench_fidelity.benchmark_inputs(mixed)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "judged with different inputs" in err[0]


def test_committed_digits_runs_hash_as_they_were_frozen():
    """Keys added to the config since (learning.uncertainty, draws, draw) hash as before at their defaults,
    so the digits fidelity benchmark's runs keep the inputs_hash every one of them recorded."""
    folders = sorted(p.parent for p in (REPO / "results/fidelity/digits").rglob("inputs.json"))
    assert len(folders) >= 21
    for folder in folders:
        inputs, manifest = load_snapshot(folder)
        assert inputs_hash(inputs) == manifest["inputs_hash"], folder
