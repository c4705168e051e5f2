"""hetune sweep --sensitivity: perturbed worlds within stated ranges, robustness per strategy (issue
"An honest simulator", item 6)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.loader import load_inputs
from hetune.sim.sensitivity import draw_world, format_robustness, perturb, robustness

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"


def test_worlds_are_deterministic_and_inside_the_ranges():
    inputs = load_inputs(EXP)
    r = inputs.experiment.sensitivity
    a, b = draw_world(inputs, 7), draw_world(inputs, 7)
    assert a == b and a != draw_world(inputs, 8)
    for w in range(1, 30):
        f = draw_world(inputs, w)
        assert all(r.step_time[0] <= v <= r.step_time[1] for v in f["step_time"].values())
        assert all(r.overheads[0] <= v <= r.overheads[1] for v in f["overheads"].values())
        assert r.scaling[0] <= f["scaling"] <= r.scaling[1] <= 1.0


def test_perturb_multiplies_what_it_names_and_never_beats_the_calibrated_scaling():
    inputs = load_inputs(EXP)
    model, batch, where = inputs.experiment.experiment.model, inputs.experiment.experiment.batch_size, "x"
    f = draw_world(inputs, 3)
    f["scaling"] = 0.6
    p = perturb(inputs, f)
    base = inputs.calibration.step_time_fn(model, batch, inputs.cluster, where)
    new = p.calibration.step_time_fn(model, batch, p.cluster, where)
    for d in inputs.cluster.devices:
        if d not in inputs.calibration.models[model]:
            continue
        assert new(d, 1) == pytest.approx(base(d, 1) * f["step_time"][d])
        n = max(g.gpus or g.cpus for _, g in inputs.cluster.node_names() if g.device == d)
        if n > 1:  # the parallel part is worse, never better: speedup over one device shrinks
            assert new(d, 1) / new(d, n) <= base(d, 1) / base(d, n) + 1e-9
        dm, pm = inputs.calibration.models[model][d], p.calibration.models[model][d]
        assert pm.start_overhead_s == pytest.approx(dm.start_overhead_s * f["overheads"][d])
    assert p.experiment.surrogate.lr_opt == pytest.approx(inputs.experiment.surrogate.lr_opt * f["lr_opt"])
    assert inputs.calibration.models[model] is not p.calibration.models[model]  # the original is untouched


def test_robustness_counts_first_places_and_worst_speedup():
    def row(s, w, seed, ttt):
        return {"strategy": s, "world": w, "seed": seed, "time_to_target_s": ttt, "makespan_s": 1.0, "cost": 1.0}
    rows = [row("tune-default", 1, 0, 100.0), row("a", 1, 0, 50.0), row("b", 1, 0, 80.0),
            row("tune-default", 2, 0, 100.0), row("a", 2, 0, 125.0), row("b", 2, 0, 90.0),
            row("tune-default", 3, 0, 100.0), row("a", 3, 0, 40.0), row("b", 3, 0, None)]
    rob = {e["strategy"]: e for e in robustness(rows, "time_to_target")}
    assert rob["a"]["first_share"] == pytest.approx(2 / 3) and rob["b"]["first_share"] == pytest.approx(1 / 3)
    assert rob["a"]["speedup_worst"] == pytest.approx(0.8) and rob["a"]["speedup_median"] == pytest.approx(2.0)
    assert rob["b"]["speedup_worst"] == 0.0  # never reached the target in world 3


def test_a_world_nobody_wins_counts_for_nobody_and_ties_share():
    # Nobody reaches the target in world 1: no first place (it once went to the alphabetically first
    # name); a and b tie in world 2 and share it.
    def row(s, w, ttt):
        return {"strategy": s, "world": w, "seed": 0, "time_to_target_s": ttt, "makespan_s": 1.0, "cost": 1.0}
    rows = [row("tune-default", 1, None), row("a", 1, None), row("b", 1, None),
            row("tune-default", 2, 100.0), row("a", 2, 50.0), row("b", 2, 50.0)]
    rob = {e["strategy"]: e for e in robustness(rows, "time_to_target")}
    assert rob["a"]["first_share"] == pytest.approx(0.25) and rob["b"]["first_share"] == pytest.approx(0.25)
    assert rob["tune-default"]["first_share"] == 0 and rob["a"]["worlds_without_winner"] == 1
    assert "in 1 of 2 worlds" in format_robustness(list(rob.values()), "time_to_target")


def test_sensitivity_sweep_writes_robustness(tmp_path, capsys):
    out = tmp_path / "sens"
    assert main(["sweep", str(EXP), "--strategies", "tune-default,random-search", "--seeds", "2", "--jobs", "1",
                 "--sensitivity", "3", "--out", str(out), "--quiet"]) == 0
    assert "perturbed world" in capsys.readouterr().out
    rob = json.loads((out / "robustness.json").read_text())
    assert rob["worlds"] == 3 and rob["ranges"]["step_time"] == [0.8, 1.25]
    none = rob["strategies"][0]["worlds_without_winner"] / rob["worlds"]  # worlds where nobody reached the target
    assert sum(e["first_share"] for e in rob["strategies"]) + none == pytest.approx(1.0)
    lines = (out / "sensitivity.csv").read_text().splitlines()
    assert len(lines) == 1 + 3 * 2 * 2


@pytest.mark.parametrize("value,needle", [
    ("[1.25, 0.8]", "sensitivity.step_time: low must be <= high"),
    ("[-0.5, 1.0]", "sensitivity.step_time: factors must be > 0"),
    ("[0.8]", "sensitivity.step_time: must be [low, high]"),
])
def test_bad_ranges_get_one_line(tmp_path, capsys, value, needle):
    code = main(["sweep", str(EXP), "--sensitivity", "2", "--seeds", "1", "--out", str(tmp_path / "s"),
                 "--set", f"sensitivity.step_time={value}"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_scaling_above_one_is_refused(tmp_path, capsys):
    code = main(["sweep", str(EXP), "--sensitivity", "2", "--out", str(tmp_path / "s"),
                 "--set", "sensitivity.scaling=[0.9, 1.2]"])
    assert code == 2 and "sensitivity.scaling: high must be <= 1" in capsys.readouterr().err
