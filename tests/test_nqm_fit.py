"""The learning-model fit (hetune calibrate curves --kind nqm): recovery, what it refuses, Ray Tune folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from hetune.calibrate.histories import History
from hetune.calibrate.nqm_fit import fit_nqm
from hetune.calibrate.nqm_recovery import design_histories, perturbed
from hetune.calibrate.tune_folder import read_tune_folder
from hetune.cli import main
from hetune.sim.loader import load_inputs
from hetune.sim.nqm import NQMParams

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def write_tune_folder(folder: Path, histories: list[History], exploits: list[tuple[str, str, int, int]] = (),
                      batch: int = 512) -> Path:
    """A Ray Tune 2.60 experiment folder holding ``histories`` (one segment each; a result per reading, with
    the accuracy repeated between readings as a trainable that evaluates every k iterations does), and
    ``exploits`` as pbt_global.txt lines (target tag, donor tag, target iteration, donor iteration)."""
    folder.mkdir(parents=True)
    for i, h in enumerate(histories):
        tid = f"abc_{i:05d}"
        d = folder / f"MyTrainable_{tid}_{i}_lr={h.segments[0].readings[0].lr:g}_2026-12-06_10-00-00"
        d.mkdir()
        rows = []
        for r in h.readings():
            rows.append({"accuracy": r.accuracy, "loss": r.loss, "training_iteration": r.iteration, "trial_id": tid,
                         "config": {"lr": r.lr, "momentum": r.momentum, "batch_size": batch}})
        (d / "params.json").write_text(json.dumps(rows[0]["config"]))
        (d / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if exploits:
        (folder / "pbt_global.txt").write_text("".join(json.dumps([*e, {}, {}]) + "\n" for e in exploits))
    return folder


def generated(seed: int = 3, loss=(0.05, 2.3, 0.05)) -> tuple[NQMParams, NQMParams, list[History]]:
    prior = load_inputs(EXP).experiment.learning.nqm
    rng = np.random.default_rng(seed)
    true = perturbed(prior, rng)
    return prior, true, design_histories(true, 512, [0.05, 0.15, 0.5], 0.5, 1000, 50, 2000, rng, loss=loss)


@pytest.mark.slow
def test_the_fit_recovers_the_parameters_that_generated_the_data():
    prior, true, data = generated()
    fit = fit_nqm(data, prior, 2000)
    identified = [n for n, row in fit["table"].items() if row["identified"] and n not in ("loss_floor", "loss_scale")]
    assert len(identified) >= 4
    for n in identified:
        row = fit["table"][n]
        assert row["low"] <= getattr(true, n) <= row["high"], (n, row, getattr(true, n))
    # the prior was off: the fit moved towards the truth
    for n in identified:
        if n != "max_accuracy":
            assert abs(np.log(fit["table"][n]["estimate"] / getattr(true, n))) < abs(np.log(prior_value(prior, n) /
                                                                                           getattr(true, n))) + 0.2


def prior_value(prior: NQMParams, n: str) -> float:
    return getattr(prior, n)


def test_one_learning_rate_is_refused_with_what_runs_are_needed(tmp_path, capsys):
    _, _, data = generated()
    folder = write_tune_folder(tmp_path / "exp", data[:1])
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(folder), "--kind", "nqm", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at least three constant-lr runs" in err[0] and "one run with an lr drop" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("damage, named", [
    ("metric", "missing 'accuracy' in any result (--metric) in 1 of"),  # no accuracy anywhere
    ("json", "result.json:2"),  # an unreadable line
    ("lr", "missing 'lr' in the config in 1 of"),  # a config without the learning rate
    ("momentum", "missing 'momentum' in the config (--momentum) in 1 of"),  # and no --momentum given
    ("all", "missing 'accuracy' in any result (--metric) in 1 of 4 trial(s); 'lr' in the config in 1 of 4 "
            "trial(s); 'momentum' in the config (--momentum) in 1 of 4 trial(s)"),  # every one in one message
])
def test_a_broken_tune_folder_is_refused_naming_the_file(tmp_path, capsys, damage, named):
    _, _, data = generated()
    folder = write_tune_folder(tmp_path / "exp", data)
    result = next(folder.glob("*_00001_*")) / "result.json"
    rows = [json.loads(x) for x in result.read_text().splitlines()]
    if damage in ("metric", "all"):
        for r in rows:
            r.pop("accuracy")
    if damage in ("lr", "momentum", "all"):
        for key in ("lr", "momentum") if damage == "all" else (damage,):
            rows[0]["config"].pop(key)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if damage == "json":
        lines = text.splitlines(keepends=True)
        text = lines[0] + "{not json\n" + "".join(lines[2:])
    result.write_text(text)
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(folder), "--kind", "nqm", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
    assert not out.exists()


def test_pbt_policy_lines_become_segments_from_the_donors_checkpoint(tmp_path):
    _, _, data = generated()
    # trial 1 exploits trial 3 at its iteration 500: its results after the exploit restart at 501, with the
    # explored lr (the last 500 iterations of the drop run, as the new segment)
    target, donor = data[1], data[3]
    kept = [r for r in target.readings() if r.iteration <= 550]  # a result after the decision, before the pause
    after = [r for r in donor.readings() if r.iteration > 500]
    target.segments[0].readings = kept + after
    folder = write_tune_folder(tmp_path / "exp", data, exploits=[("1_lr=0.15", "3_lr=0.5", 500, 500)])
    hs = {h.key.split("/")[1]: h for h in read_tune_folder(folder, "run0")}
    t = hs["abc_00001"]
    assert len(t.segments) == 2
    assert [r.iteration for r in t.segments[0].readings][-1] == 550
    seg = t.segments[1]
    assert seg.origin is not None and seg.origin.donor == "run0/abc_00003" and seg.origin.iteration == 500
    assert seg.readings[0].iteration == 550 and seg.readings[0].lr == pytest.approx(0.05)


@pytest.mark.slow
def test_the_cli_writes_a_learning_file_an_experiment_can_name(tmp_path, capsys):
    _, _, data = generated(loss=None)
    folder = write_tune_folder(tmp_path / "exp", data)
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(folder), "--kind", "nqm", "--out", str(out), "--no-loss"]) == 0
    printed = capsys.readouterr().out
    assert "nqm fitted to 4 trials" in printed and "curvature_min" in printed
    text = out.read_text()
    assert "[learning.nqm]" in text and "[fit.parameters.slope]" in text and str(tmp_path) not in text
    inputs = load_inputs(EXP, [f'learning.path="{out}"'])
    fitted = inputs.experiment.learning
    assert fitted.path == "" and fitted.nqm != load_inputs(EXP).experiment.learning.nqm
    # an existing file is not replaced without --force
    assert main(["calibrate", "curves", str(folder), "--kind", "nqm", "--out", str(out), "--no-loss"]) == 2


def test_a_learning_path_that_is_not_a_learning_file_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[learning.nqm]\ncurvature_max = -1.0\n")
    assert main(["simulate", str(EXP), "--set", f'learning.path="{bad}"', "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "learning.nqm.curvature_max" in err and str(bad) in err
    assert main(["simulate", str(EXP), "--set", f'learning.path="{tmp_path / "none.toml"}"',
                 "--out", str(tmp_path / "o")]) == 2
    assert "learning.path" in capsys.readouterr().err


def test_a_metric_that_is_not_an_accuracy_is_refused_by_both_fits(tmp_path, capsys):
    """Ray's pbt_example reports mean_accuracy from 0 to 200: a model of accuracy fitted to it predicted a best
    accuracy of 1.000 (issue "No traceback, no hang, nothing lost", item 4)."""
    from dataclasses import replace as dc_replace

    _, _, data = generated()
    scaled = []
    for h in data:
        seg = h.segments[0]
        readings = [dc_replace(r, accuracy=None if r.accuracy is None else 200 * r.accuracy) for r in seg.readings]
        scaled.append(dc_replace(h, segments=[dc_replace(seg, readings=readings)]))
    folder = write_tune_folder(tmp_path / "exp", scaled)
    for kind in ("nqm", "skills"):
        out = tmp_path / f"{kind}.toml"
        assert main(["calibrate", "curves", str(folder), "--kind", kind, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "[0, 1]" in err and not out.exists(), err


@pytest.mark.slow
def test_a_truncated_last_result_is_read_up_to_it_and_bell_says_what_it_reads(tmp_path, capsys):
    _, _, data = generated()
    folder = write_tune_folder(tmp_path / "exp", data)
    result = next(folder.glob("*/result.json"))
    text = result.read_text()
    result.write_text(text[: text.rstrip().rfind("\n") + 1] + text.rstrip().splitlines()[-1][:40])  # a crash mid-line
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "curves", str(folder), "--kind", "nqm", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "a truncated last result, read up to the line before it" in err and str(result) in err
    assert main(["calibrate", "curves", str(folder), "--out", str(tmp_path / "bell.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--kind bell reads hetune run folders" in err


def test_nan_readings_in_a_tune_folder_are_counted_in_one_warning(tmp_path, capsys):
    _, _, data = generated()
    folder = write_tune_folder(tmp_path / "exp", data)
    result = sorted(folder.glob("*/result.json"))[0]
    rows = [json.loads(x) for x in result.read_text().splitlines()]
    rows[1]["accuracy"], rows[2]["accuracy"] = float("nan"), float("inf")
    result.write_text("".join(json.dumps(r) + "\n" for r in rows))
    histories = read_tune_folder(folder, "r")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 result(s) of 1 trial(s) report 'accuracy' as NaN or infinite" in err[0]
    readings = [r.accuracy for h in histories for s in h.segments for r in s.readings]
    assert readings and all(a is None or np.isfinite(a) for a in readings)


def test_a_trial_with_progress_csv_only_is_named_with_what_it_lacks(tmp_path):
    from hetune.sim.errors import ConfigError

    _, _, data = generated()
    folder = write_tune_folder(tmp_path / "exp", data, exploits=[("1_lr=0.15", "3_lr=0.5", 500, 500)])
    donor = next(d for d in folder.iterdir() if "abc_00003" in d.name)
    (donor / "result.json").unlink()
    (donor / "progress.csv").write_text("training_iteration,accuracy\n1,0.1\n")
    with pytest.raises(ConfigError) as e:
        read_tune_folder(folder, "run0")
    assert donor.name in str(e.value) and "progress.csv but no result.json" in str(e.value)
