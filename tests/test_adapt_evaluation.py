"""hetune adapt evaluate --leave-one-out / --transfer: each pick against the pooled-lookup baseline."""

from __future__ import annotations

import json

import pytest

from conftest import write_table
from hetune.adapt.evaluation import pooled_lookup, summary
from hetune.adapt.tables import read_table
from hetune.cli import main


def test_pooled_lookup_is_the_best_sequence_on_average(tmp_path):
    a = read_table(write_table(tmp_path / "a.csv", best=(1, 0, 3)))
    b = read_table(write_table(tmp_path / "b.csv", best=(1, 0, 2)))
    assert pooled_lookup([a]) == a.best().actions == (1, 0, 3)
    # (1, 0, 3) is 1st on a and 2nd-tier on b; no other sequence is as good on both together
    assert pooled_lookup([a, b]) in {(1, 0, 3), (1, 0, 2)}


@pytest.mark.parametrize("flag", ["--leave-one-out", "--transfer"])
def test_generalisation_reports_every_pick_and_the_baseline(tmp_path, capsys, flag):
    tables = [str(write_table(tmp_path / f"{n}.csv", best=best))
              for n, best in (("x", (1, 0, 3)), ("y", (1, 0, 3)), ("z", (2, 2, 2)))]
    out = tmp_path / "gen.json"
    assert main(["adapt", "evaluate", flag, *tables, "--seeds", "2", "--episodes", "640", "--quiet",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    picks = data["picks"]
    assert len(picks) == (3 * 2 if flag == "--leave-one-out" else 3 * 2 * 2)
    for p in picks:
        table = read_table(p["table"])
        for who in ("policy", "pooled_lookup"):
            seq = tuple(p[who]["sequence"])
            assert p[who]["rank"] == table.rank(seq)
            assert p[who]["regret_points"] == pytest.approx(100 * (table.best().acc - table.rows[seq].acc), abs=1e-3)
        assert p["table"] not in p["learned_from"]
    # z's best (2, 2, 2) is nobody else's: the lookup from x and y plays (1, 0, 3) there
    z = [p for p in picks if p["table"].endswith("z.csv") and p["kind"] == "leave-one-out"]
    assert all(tuple(p["pooled_lookup"]["sequence"]) == (1, 0, 3) for p in z)
    assert data["summary"] == summary(picks)
    printed = capsys.readouterr().out
    assert printed.count("; pooled lookup ") == len(picks) and "than the lookup" in printed


def test_bad_generalisation_input(tmp_path, capsys):
    t = str(write_table(tmp_path / "t.csv"))
    for argv, needle in [(["--leave-one-out", t], "needs two or more tables"),
                         (["--leave-one-out", "--transfer", t, t], "cannot be combined"),
                         (["--transfer", t, t, "--seeds", "0"], "--seeds: must be >= 1")]:
        assert main(["adapt", "evaluate", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1


def test_held_out_evaluation_carries_the_lookup_of_the_policys_own_tables(tmp_path, capsys):
    a, b = (str(write_table(tmp_path / f"{n}.csv", best=(1, 0, 3))) for n in "ab")
    held = str(write_table(tmp_path / "held.csv", best=(2, 2, 2)))
    assert main(["adapt", "learn", a, b, "--episodes", "640", "--out", str(tmp_path / "p")]) == 0
    assert main(["adapt", "evaluate", str(tmp_path / "p"), held]) == 0
    ev = json.loads((tmp_path / "p" / "evaluation.json").read_text())[0]
    assert ev["pooled_lookup"]["sequence"] == [1, 0, 3]
    assert ev["pooled_lookup"]["rank"] == read_table(held).rank((1, 0, 3))
    assert "pooled lookup of the policy's tables (1, 0, 3)" in capsys.readouterr().out
    (tmp_path / "a.csv").unlink()  # the policy's tables moved: no baseline, still an evaluation
    assert main(["adapt", "evaluate", str(tmp_path / "p"), held, "--out", str(tmp_path / "e2.json")]) == 0
    assert "pooled_lookup" not in json.loads((tmp_path / "e2.json").read_text())[0]
