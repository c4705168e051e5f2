"""CLI: outputs, determinism, sweep resume, and every bad-input case getting one clear line."""

from __future__ import annotations

import tomllib
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.events import read_events


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_simulate_writes_the_three_files_and_is_deterministic(tmp_path, capsys, default_experiment):
    outs = []
    for name in ("a", "b"):
        code, out, _ = run(["simulate", default_experiment, "--strategy", "hrfs", "--seed", 3,
                            "--out", tmp_path / name], capsys)
        assert code == 0 and "time to target" in out
        outs.append(tmp_path / name)
    a, b = ((p / "events.jsonl").read_bytes() for p in outs)
    assert a == b
    code, _, _ = run(["simulate", default_experiment, "--strategy", "hrfs", "--seed", 4, "--out", tmp_path / "c"],
                     capsys)
    assert (tmp_path / "c" / "events.jsonl").read_bytes() != a
    summary = json.loads((outs[0] / "summary.json").read_text())
    for key in ("time_to_target_s", "makespan_s", "best_accuracy", "cost", "exploits", "device_hours_v100",
                "utilization_k80", "checkpoint_overhead_s", "migration_overhead_s"):
        assert key in summary
    cfg = tomllib.loads((outs[0] / "config.toml").read_text())
    assert cfg["strategy"]["name"] == "hrfs" and cfg["experiment"]["seed"] == 3
    assert len(read_events(outs[0] / "events.jsonl")) > 100


def test_sweep_ranks_resumes_and_skips_finished_cells(tmp_path, capsys, default_experiment):
    out = tmp_path / "sw"
    code, text, _ = run(["sweep", default_experiment, "--strategies", "tune-default,hrfs", "--seeds", 2,
                         "--jobs", 1, "--out", out, "--quiet"], capsys)
    assert code == 0 and "best strategy:" in text
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert {(r["strategy"], r["seed"]) for r in rows} == {(s, str(i)) for s in ("tune-default", "hrfs") for i in (0, 1)}
    assert {"device_hours_k80", "utilization_v100", "time_to_target_s"} <= set(rows[0])
    # Mark a cell so we can see it is kept, drop another: --resume must only rerun the dropped one.
    rows[0]["makespan_s"] = "123456"
    kept = rows[:-1]
    with (out / "sweep.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(kept)
    code, _, _ = run(["sweep", default_experiment, "--strategies", "tune-default,hrfs", "--seeds", 2,
                      "--jobs", 1, "--out", out, "--resume", "--quiet"], capsys)
    again = list(csv.DictReader((out / "sweep.csv").open()))
    assert len(again) == 4
    assert any(float(r["makespan_s"]) == 123456 for r in again)
    import pandas as pd
    assert len(pd.read_parquet(out / "sweep.parquet")) == 4
    ranking = json.loads((out / "ranking.json").read_text())
    # the best is the strategy with the smaller median time to target over the rows written (one winner)
    import statistics
    med = {s: statistics.median(float(r["time_to_target_s"]) for r in again if r["strategy"] == s)
           for s in ("tune-default", "hrfs")}
    assert med["tune-default"] != med["hrfs"] and ranking["best"] == min(med, key=med.get)
    # resuming with another config is refused, nothing lost
    code, _, err = run(["sweep", default_experiment, "--strategies", "tune-default,hrfs", "--seeds", 2, "--out", out,
                        "--resume", "--quiet", "--set", "experiment.population=5"], capsys)
    assert code == 2 and "made with other inputs" in err
    assert len(list(csv.DictReader((out / "sweep.csv").open()))) == 4


def test_never_reaching_the_target_ranks_last():
    from hetune.sim.standings import ranking
    rows = [{"strategy": "a", "seed": 0, "time_to_target_s": None, "makespan_s": 10.0, "cost": 1.0},
            {"strategy": "b", "seed": 0, "time_to_target_s": 9999.0, "makespan_s": 20000.0, "cost": 1.0}]
    assert [e["strategy"] for e in ranking(rows)] == ["b", "a"]


def _bad(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("overrides,needle", [
    (["experiment.popuation=3"], "experiment.popuation: unknown key"),
    (["experiment.population=-1"], "experiment.population: must be >= 1"),
    (["experiment.population=\"many\""], "experiment.population: must be an integer"),
    (["pbt.quantile_fraction=0.7"], "pbt.quantile_fraction: must be in (0, 0.5]"),
    (["pbt.quantile_fraction=0"], "pbt.quantile_fraction: must be in (0, 0.5]"),
    (["cluster.path=/nonexistent/cluster.toml"], "cluster.path: /nonexistent/cluster.toml is not a file"),
    (["strategies.hrfs.weak_ability=1"], "strategies.hrfs.weak_ability: must be >= 2"),
    (["strategies.hrfs.nope=1"], "strategies.hrfs.nope: unknown key"),
    (["strategies.leader-fusion.fuse_workers=1"],
     "strategies.leader-fusion.fuse_workers: must be 0 (all) or at least 2"),
    (["strategies.leader-fusion.others=\"fast\""], "strategies.leader-fusion.others: must be"),
    (["experiment.model=\"vgg\""], "models.vgg: no calibration for model 'vgg'"),
    (["pbt.perturbation_interval=30"], "pbt.perturbation_interval: must be a multiple"),
    (["novalue"], "expected dotted.key=value"),
    (["experiment.budget_s=-5"], "experiment.budget_s: must be >= 0"),
    (["experiment.budget_cost=-1.0"], "experiment.budget_cost: must be >= 0"),
    (["experiment.objective=\"best_accuracy_at_budget\""], "experiment.objective: best_accuracy_at_budget needs"),
    (["experiment.objective=\"speed\""], "experiment.objective:"),
    (["learning.nqm.noise_std=5"], "learning.nqm.noise_std: must be at most 0.5"),
    (["learning.nqm.noise=1e308"], "learning.nqm.noise: must be at most 1e+12"),
    (["surrogate.noise_std=0.9"], "surrogate.noise_std: must be in [0, 0.5]"),
    (['learning.kind="skills"', "learning.params.ar_std=0.7"], "learning.params.ar_std: must be in [0, 0.5]"),
])
def test_bad_config_gets_one_line_and_exit_2(tmp_path, capsys, default_experiment, overrides, needle):
    args = ["simulate", default_experiment, "--out", tmp_path / "out"]
    for o in overrides:
        args += ["--set", o]
    code, _, err = run(args, capsys)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_bad_files_name_the_file(tmp_path, capsys, default_experiment):
    code, _, err = run(["simulate", tmp_path / "missing.toml"], capsys)
    assert code == 2 and "missing.toml: file not found" in err
    code, _, err = run(["simulate", _bad(tmp_path, "[experiment\nname=1")], capsys)
    assert code == 2 and "bad.toml: not valid TOML" in err
    cluster = (REPO / "configs/clusters/gavel-12.toml").read_text().replace("gpus = 4", "gpus = -4", 1)
    cp = tmp_path / "c.toml"
    cp.write_text(cluster)
    code, _, err = run(["simulate", default_experiment, "--set", f"cluster.path={cp}"], capsys)
    assert code == 2 and "c.toml: nodes[0].gpus: must be >= 0" in err


def test_unknown_strategy(tmp_path, capsys, default_experiment):
    code, _, err = run(["simulate", default_experiment, "--strategy", "magic"], capsys)
    assert code == 2 and "unknown strategy 'magic'" in err
    code, _, err = run(["sweep", default_experiment, "--strategies", "hrfs,magic", "--out", tmp_path / "s"], capsys)
    assert code == 2 and "unknown strategy 'magic'" in err and not (tmp_path / "s").exists()


def test_strategies_lists_every_registered_strategy(capsys):
    code, out, _ = run(["strategies"], capsys)
    names = [line.split()[0] for line in out.splitlines()]
    assert code == 0
    assert {"tune-default", "hrfs", "throughput-proportional", "rank-aware", "leader-fusion"} <= set(names)


def test_sim_never_imports_torch_or_ray():
    code = ("import sys, sim.engine, sim.sweep, sim.results, sim.loader, sim.summary, hetune.cli; "
            "bad = [m for m in ('torch', 'ray', 'torchvision') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_atomic_writes_get_the_mode_a_plain_open_would(tmp_path):
    from hetune.sim.tomlfile import atomic_write_text

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    assert os.stat(tmp_path / "atomic.txt").st_mode & 0o777 == os.stat(plain).st_mode & 0o777


def test_a_closed_pipe_ends_quietly():
    """`hetune strategies | head -0`: the reader has gone before the first line is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "hetune.cli", "strategies"], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == ""


def test_slots_prints_each_nodes_ray_start_resources(capsys):
    assert main(["slots", str(REPO / "configs/experiments/smoke-local.toml"), "--strategy", "hrfs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == """local-fast: ray start --address=HEAD:6379 --resources='{"hetune-worker:0": 1.0}'"""
    assert out[1].startswith("local-slow: ") and out[2] == "hrfs: 2 worker slot(s) on 2 node(s)"


def test_a_sweep_logging_to_a_file_prints_a_line_per_tenth(tmp_path, capsys):
    assert main(["sweep", "--strategies", "hrfs", "--seeds", "20", "--jobs", "1", "--out", str(tmp_path / "s")]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "sweep: 2/20 runs (10%)" and lines[-1] == "sweep: 20/20 runs (100%)" and len(lines) == 10
