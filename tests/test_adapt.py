"""adapt: table validation, a tiny real build-table, deterministic learning, exact policy loading on transfer."""

from __future__ import annotations

import csv
import itertools
import json

import pytest

from conftest import REPO
from hetune.cli import main
from real.adapt_csv import read_table

COLS = ["a1", "a2", "a3", "t1", "t2", "t3", "total_time", "acc", "model"]


def write_table(path, best=(1, 0, 3), model="convnet2", drop=None, bad=None):
    rows = []
    for seq in itertools.product(range(4), repeat=3):
        acc = 0.5 + 0.1 * sum(a == b for a, b in zip(seq, best)) + 0.01 * seq[2]
        rows.append({"a1": seq[0], "a2": seq[1], "a3": seq[2], "t1": 300, "t2": 250 - 10 * seq[0],
                     "t3": 200 - 10 * (seq[0] + seq[1]), "total_time": 400, "acc": round(min(acc, 1.0), 4),
                     "model": model})
    if drop is not None:
        rows.pop(drop)
    if bad is not None:
        rows[5].update(bad)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLS)
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.mark.parametrize("kwargs,needle", [
    ({"drop": 7}, "1 of 64 action sequences missing"),
    ({"bad": {"a2": "x"}}, ":7: a1..a3: actions must be integers"),
    ({"bad": {"a2": 1.5}}, ":7: a1..a3: actions must be integers"),
    ({"bad": {"acc": 1.2}}, ":7: acc: must be in [0, 1]"),
    ({"bad": {"a1": 4}}, ":7: a1..a3: actions must be 0-3"),
])
def test_bad_tables_are_refused_with_the_row(tmp_path, capsys, kwargs, needle):
    t = write_table(tmp_path / "t.csv", **kwargs)
    assert main(["adapt", "learn", str(t), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and not (tmp_path / "p").exists()


def test_model_column_or_flag(tmp_path):
    t = write_table(tmp_path / "t.csv")
    assert read_table(t).model == "convnet2"
    rows = list(csv.DictReader(open(t)))
    with open(tmp_path / "n.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLS[:-1], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(Exception, match="--model"):
        read_table(tmp_path / "n.csv")
    assert read_table(tmp_path / "n.csv", "convnet3").model == "convnet3"


def test_learning_is_deterministic_and_finds_the_best(tmp_path, capsys):
    t = write_table(tmp_path / "t.csv", best=(2, 1, 3))
    for name in ("a", "b"):
        assert main(["adapt", "learn", str(t), "--episodes", "6000", "--seed", "3", "--out", str(tmp_path / name)]) == 0
    a = json.loads((tmp_path / "a" / "policy.json").read_text())
    b = json.loads((tmp_path / "b" / "policy.json").read_text())
    assert a["sha256"] == b["sha256"]
    assert main(["adapt", "evaluate", str(tmp_path / "a"), str(t)]) == 0
    ev = json.loads((tmp_path / "a" / "evaluation.json").read_text())[0]
    assert ev["rank"] <= 3 and ev["no_adaptation_rank"] > 1


def test_transfer_evaluation_loads_exactly_the_policy_given(tmp_path):
    ta = write_table(tmp_path / "a.csv", best=(0, 0, 0))
    tb = write_table(tmp_path / "b.csv", best=(2, 2, 2))
    tc = write_table(tmp_path / "c.csv", best=(1, 1, 1))
    for name, t in (("pa", ta), ("pb", tb)):
        assert main(["adapt", "learn", str(t), "--episodes", "4000", "--out", str(tmp_path / name)]) == 0
    results = {}
    for name in ("pa", "pb"):
        assert main(["adapt", "evaluate", str(tmp_path / name), str(tc)]) == 0
        results[name] = json.loads((tmp_path / name / "evaluation.json").read_text())[0]
        meta = json.loads((tmp_path / name / "policy.json").read_text())
        assert results[name]["policy_sha256"] == meta["sha256"]  # the file given, not another
    assert results["pa"]["policy_sha256"] != results["pb"]["policy_sha256"]
    assert results["pa"]["sequence"] != results["pb"]["sequence"]


def test_build_table_trains_every_sequence(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text('[adapt]\nname = "tiny"\nmodel = "convnet2"\nbudget_s = 120.0\n'
                    'changes = [{time = 30.0, change = "up"}]\ntime_scale = 1000.0\nepoch_samples = 32\n'
                    'test_samples = 32\nbatch_size = 32\n')
    out = tmp_path / "tiny.csv"
    assert main(["adapt", "build-table", str(scen), "--out", str(out), "--quiet"]) == 0
    table = read_table(out)
    assert len(table.rows) == 64
    for r in table.rows.values():
        assert r.total_time == 120.0 and r.times_left[0] >= r.times_left[1] >= r.times_left[2] >= 0
        assert 0.0 <= r.acc <= 1.0


def test_bad_scenario(tmp_path, capsys):
    scen = tmp_path / "s.toml"
    scen.write_text('[adapt]\nname = "x"\nmodel = "convnet2"\nchanges = []\n')
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "x.csv")]) == 2
    assert "adapt.changes: need at least one" in capsys.readouterr().err
