"""adapt build-table: scenarios, clocks and the real training of every action sequence (tiny, on CPU)."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.adapt.tables import read_table


TINY = ('[adapt]\nname = "tiny"\nmodel = "convnet2"\nbudget_s = 120.0\n'
        'changes = [{time = 30.0, change = "up"}]\ntime_scale = 1000.0\nepoch_samples = 32\n'
        'test_samples = 32\nfinal_test_samples = 64\nbatch_size = 32\nimage_size = 8\n')


@pytest.mark.slow
@pytest.mark.torch
def test_build_table_trains_every_sequence_and_resumes(tmp_path, capsys):
    scen = tmp_path / "s.toml"
    scen.write_text(TINY)
    out = tmp_path / "tiny.csv"
    assert main(["adapt", "build-table", str(scen), "--out", str(out), "--quiet"]) == 0
    one = read_table(out)
    # a second repeat added to the first, on the clock measured for the first
    assert main(["adapt", "build-table", str(scen), "--out", str(out), "--quiet", "--repeats", "2",
                 "--resume"]) == 0
    table = read_table(out)  # the reader refuses a table without 64 rows or with accuracies outside [0, 1]
    for seq, r in table.rows.items():
        assert r.total_time == 120.0 and r.times_left[0] >= r.times_left[1] >= r.times_left[2] >= 0
        assert max(abs(a - b) for a, b in zip(r.times_left, one.rows[seq].times_left)) < 1e-3
        # the mean of 2 final accuracies, each measured on 64 images (not the 32 evaluated while training)
        assert abs(r.acc * 128 - round(r.acc * 128)) < 1e-3
    with out.open() as fh:
        raw = list(csv.DictReader(fh))
    assert {row["repeats"] for row in raw} == {"2"}
    assert any(float(row["acc_se"]) > 0 for row in raw)  # two seeds do not train identically
    for row in raw:
        runs = [float(a) for a in row["acc_runs"].split()]
        seq = (int(row["a1"]), int(row["a2"]), int(row["a3"]))
        assert len(runs) == 2 and abs(sum(runs) / 2 - float(row["acc"])) < 1e-4
        assert abs(runs[0] - one.rows[seq].acc) < 1e-5  # the first repeat is kept, not retrained
    # resuming what cannot be resumed is refused in one line, and the table is kept as it was
    before = out.read_bytes()
    capsys.readouterr()
    for extra, needle in [([], "already has 2 repeats"),
                          (["--repeats", "3", "--set", "adapt.lr=0.5"], "another scenario"),
                          (["--repeats", "3", "--seed", "7"], "built from seed 0, not 7")]:
        argv = ["adapt", "build-table", str(scen), "--out", str(out), "--quiet", "--resume"]
        assert main(argv + (extra or ["--repeats", "2"])) == 2
        assert needle in capsys.readouterr().err
        assert out.read_bytes() == before
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "none.csv"), "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    # a table built before scenarios had base_epoch_s (it charged measured seconds x time_scale)
    # resumes as base_epoch_s = 0; one from before ema_decay too (it scored the last weights) as ema_decay = 0
    cost = out.with_suffix(".cost.json")
    saved = json.loads(cost.read_text())
    assert "ema_decay=0.0, " in saved["scenario"] and ", base_epoch_s=0.0)" in saved["scenario"]
    before_base = saved["scenario"].replace(", base_epoch_s=0.0)", ")")
    for repeats, scenario in [("3", before_base), ("4", before_base.replace("ema_decay=0.0, ", ""))]:
        cost.write_text(json.dumps(dict(saved, scenario=scenario)))
        assert main(["adapt", "build-table", str(scen), "--out", str(out), "--quiet", "--repeats", repeats,
                     "--resume"]) == 0
        assert len(next(csv.DictReader(out.open()))["acc_runs"].split()) == int(repeats)
    four = read_table(out)
    assert all(len(r.runs) == 4 and abs(sum(r.runs) / 4 - r.acc) < 1e-4 for r in four.rows.values())


@pytest.mark.slow
@pytest.mark.torch
def test_scenarios_built_on_one_clock_differ_by_the_scenario_alone(tmp_path, capsys, monkeypatch):
    from hetune.adapt.clock import EpochCost

    early, late = tmp_path / "early.toml", tmp_path / "late.toml"
    early.write_text(TINY)
    late.write_text(TINY.replace("time = 30.0", "time = 60.0"))
    clock = tmp_path / "clock.json"
    assert main(["adapt", "clock", str(early), "--out", str(clock), "--rounds", "1"]) == 0
    assert "20 structures timed" in capsys.readouterr().out

    def no_timing(*a, **k):
        raise AssertionError("a table built on a given clock must not time anything")
    monkeypatch.setattr(EpochCost, "prime", no_timing)
    for scen in (early, late):
        assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / f"{scen.stem}.csv"),
                     "--clock", str(clock), "--quiet"]) == 0
        # the table's own cost file holds the clock, so --resume adds repeats on it
        assert json.loads((tmp_path / f"{scen.stem}.cost.json").read_text())["costs"] == \
            json.loads(clock.read_text())["costs"]
    a, b = read_table(tmp_path / "early.csv"), read_table(tmp_path / "late.csv")
    assert a.rows[(3, 3, 3)].times_left[0] > b.rows[(3, 3, 3)].times_left[0]
    for seq in a.rows:  # after the up, an epoch of one structure costs the same in both scenarios
        ta, tb = a.rows[seq].times_left, b.rows[seq].times_left
        if tb[1] > 0:
            assert abs((ta[0] - ta[1]) - (tb[0] - tb[1])) < 3e-3  # the CSV rounds to 1 ms
    # a clock measured for other work per step, a missing or unreadable file, or --clock with
    # --resume: refused in one line, and no table is written
    capsys.readouterr()
    out = tmp_path / "other.csv"
    for extra, needle in [(["--clock", str(clock), "--set", "adapt.batch_size=16"],
                           "clock.batch_size: was measured for 32, this scenario has 16"),
                          (["--clock", str(tmp_path / "none.json")], "no such clock file"),
                          (["--clock", str(early)], "not a JSON clock file"),
                          (["--clock", str(clock), "--resume"], "keeps the clock it was built on")]:
        assert main(["adapt", "build-table", str(early), "--out", str(out), "--quiet"] + extra) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1
        assert not out.exists() and not out.with_suffix(".cost.json").exists()
    assert main(["adapt", "clock", str(early), "--out", str(clock), "--rounds", "0"]) == 2


@pytest.mark.slow
@pytest.mark.torch
def test_base_epoch_s_makes_a_table_the_same_on_a_host_twice_as_slow(tmp_path, capsys):
    scen = tmp_path / "tiny.toml"
    scen.write_text(TINY + "base_epoch_s = 10.0\n")
    fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
    assert main(["adapt", "clock", str(scen), "--out", str(fast), "--rounds", "1"]) == 0
    clock = json.loads(fast.read_text())
    slow.write_text(json.dumps(dict(clock, costs=[[k, 2 * e, 2 * v] for k, e, v in clock["costs"]])))
    tables = {}
    for name, path, extra in [("fast", fast, []), ("slow", slow, []),
                              ("slow, time_scale", slow, ["--set", "adapt.base_epoch_s=0"])]:
        out = tmp_path / f"{name.replace(', ', '-')}.csv"
        args = ["adapt", "build-table", str(scen), "--out", str(out), "--clock", str(path), "--quiet"]
        assert main(args + extra) == 0
        tables[name] = read_table(out)
    fast_t, slow_t = tables["fast"], tables["slow"]
    for seq in fast_t.rows:  # the same epochs fit, so the same training: equal times and accuracy
        assert fast_t.rows[seq].times_left == pytest.approx(slow_t.rows[seq].times_left, abs=2e-3)
        assert fast_t.rows[seq].acc == slow_t.rows[seq].acc
    nothing = fast_t.rows[(3, 3, 3)].times_left
    assert nothing[0] - nothing[1] >= 10.0  # one base epoch (10 s) and an evaluation after the up
    # without base_epoch_s, measured seconds x time_scale: the slower host's epochs cost twice the budget
    scaled = tables["slow, time_scale"].rows[(3, 3, 3)].times_left
    assert scaled[0] - scaled[1] == pytest.approx(2 * 1000.0 * sum(clock["costs"][0][1:]), rel=0.01)
    capsys.readouterr()
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "bad.csv"), "--clock", str(fast),
                 "--set", "adapt.base_epoch_s=-1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "base_epoch_s" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "bad.csv").exists()


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("ema_decay", [0.0, 0.5])
def test_sequences_sharing_a_prefix_get_what_each_trained_alone_gets(ema_decay):
    import copy

    import torch

    from hetune.adapt.tables import SEQUENCES
    from hetune.adapt.scenario import Change, Scenario
    from hetune.adapt.build import Job, _last_acc, _play_sequences
    from hetune.adapt.net2net import convnet2, deepen

    s = Scenario(name="t", model="convnet2", budget_s=120.0, changes=(Change(30.0, "up"),), time_scale=1000.0,
                 epoch_samples=32, test_samples=32, batch_size=32, image_size=8, ema_decay=ema_decay)
    torch.manual_seed(0)
    y = torch.randint(0, 10, (96,))
    x = torch.rand(96, 3, 8, 8) + 0.5 * y.float().view(-1, 1, 1, 1) / 10  # a learnable signal
    data = (x[:64], y[:64], x[64:], y[64:])
    # a fixed clock (8 s per epoch, 1 s per evaluation) rather than a measured one: on a loaded host
    # the measured epochs can cost so much that the budget ends before the sequences differ
    base, job = convnet2(), Job(s, data, 1, lambda model, xtr, xte: (0.008, 0.001))  # type: ignore[arg-type]
    job.clock = 40.0
    pre = torch.optim.Adam(base.parameters(), lr=0.01)
    for _ in range(20):  # pre-trained past predicting one class, so the sequences' outcomes can differ
        pre.zero_grad()
        torch.nn.functional.cross_entropy(base(x[:64]), y[:64]).backward()
        pre.step()
    before = copy.deepcopy(base.state_dict())
    played = {seq: (times, acc) for seq, times, acc in _play_sequences(base, job, 0.01, x[:32])}
    assert list(played) == SEQUENCES
    assert job.clock == 40.0 and all(torch.equal(v, before[k]) for k, v in base.state_dict().items())
    assert len({acc for _, acc in played.values()}) > 1
    for seq in [(0, 0, 0), (2, 0, 1), (1, 3, 2), (3, 3, 3)]:  # each sequence trained on its own
        model, alone, lr, times, ema = copy.deepcopy(base), job.fork(), 0.01, [], None
        for k, a in enumerate(seq):
            times.append(max(0.0, alone.end - alone.clock))
            deepen(model, a, data=[x[:32]])
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            if k == 2:  # the average of the final structure's weights (None without ema_decay)
                ema = alone.moving_average(model)
            alone.train_epoch(model, opt, ema)
            alone.evaluate(model)
            lr = opt.param_groups[0]["lr"]
        while alone.clock < alone.end:
            alone.train_epoch(model, opt, ema)
            alone.evaluate(model)
        assert played[seq] == (tuple(times), _last_acc(alone, ema.module if ema else model))
        if ema:  # the average is what is scored, and it is not the last weights
            assert not all(torch.equal(p, q) for p, q in zip(ema.module.parameters(), model.parameters()))


def test_epoch_cost_is_measured_once_per_structure_and_tells_blocks_apart():
    import torch

    from hetune.adapt.clock import EpochCost
    from hetune.adapt.scenario import Scenario
    from hetune.adapt.net2net import convnet2, deepen

    cost = EpochCost(Scenario(name="c", model="convnet2", epoch_samples=64, batch_size=32), rounds=1)
    x = torch.rand(64, 3, 16, 16)
    base = cost(convnet2(), x, x)
    assert base[0] > 0 and base[1] > 0
    assert cost(convnet2(), x, x) == base and len(cost._cache) == 1  # the same structure is not re-timed
    cost(deepen(convnet2(), 0), x, x)
    cost(deepen(convnet2(), 1), x, x)  # same shapes as a layer added to block 0, another place
    assert len(cost._cache) == 3


def test_bad_scenario(tmp_path, capsys):
    scen = tmp_path / "s.toml"
    scen.write_text('[adapt]\nname = "x"\nmodel = "convnet2"\nchanges = []\n')
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "x.csv")]) == 2
    assert "adapt.changes: need at least one" in capsys.readouterr().err
    scen.write_text('[adapt]\nname = "x"\nmodel = "convnet2"\nchanges = [{time = 1.0, change = "up"}]\n'
                    'image_size = 12\n')
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "x.csv")]) == 2
    assert "adapt.image_size: must be 32, 16 or 8" in capsys.readouterr().err
    scen.write_text('[adapt]\nname = "x"\nmodel = "convnet2"\nchanges = [{time = 1.0, change = "up"}]\n'
                    'ema_decay = 1.0\n')
    assert main(["adapt", "build-table", str(scen), "--out", str(tmp_path / "x.csv")]) == 2
    assert "adapt.ema_decay: must be in [0, 1), got 1.0" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_shipped_scenarios_load():
    from hetune.adapt.scenario import load_scenario

    ups = {}
    for path in sorted((REPO / "configs/adapt").glob("adapt-convnet*.toml")):
        s = load_scenario(path)
        ups[s.name] = (s.model, s.up_time, s.budget_s)
    five = {"early": 70.0, "early-middle": 140.0, "middle": 200.0, "middle-late": 270.0, "late": 330.0}
    want = {n: ("convnet2", up, 400.0) for n, up in five.items()}
    want.update({f"convnet3-{n}": ("convnet3", up, 400.0) for n, up in five.items()})
    want.update({f"up{up}": ("convnet2", float(up), 400.0) for up in (105, 170, 235, 300)})  # held out: checks only
    assert ups == want


@pytest.mark.parametrize("key, value", [("lr", "0.0"), ("lr_decay", "1.5"), ("signal", "-1.0"),
                                        ("time_scale", "0.0"), ("start_offset_s", "-5.0")])
def test_a_scenario_value_out_of_range_is_refused_naming_its_key(tmp_path, key, value):
    from hetune.adapt.scenario import load_scenario
    from hetune.sim.errors import ConfigError

    path = tmp_path / "s.toml"
    path.write_text(TINY)
    load_scenario(path)
    with pytest.raises(ConfigError, match=rf"adapt\.{key}"):
        load_scenario(path, [f"adapt.{key}={value}"])
