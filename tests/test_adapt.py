"""adapt learn / evaluate: table validation, deterministic learning, exact policy loading on transfer, the
simulator hook. Building tables is tests/test_adapt_table.py."""

from __future__ import annotations

import csv
import json
import math

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.adapt.tables import read_table
from hetune.sim.errors import ConfigError

from conftest import COLS, write_rows, write_table

@pytest.mark.parametrize("kwargs,needle", [
    ({"drop": 7}, "1 of 64 action sequences missing"),
    ({"bad": {"a2": "x"}}, ":7: a1..a3: actions must be integers"),
    ({"bad": {"a2": 1.5}}, ":7: a1..a3: actions must be integers"),
    ({"bad": {"acc": 1.2}}, ":7: acc: must be in [0, 1]"),
    ({"bad": {"a1": 4}}, ":7: a1..a3: actions must be 0-3"),
    ({"bad": {"acc_runs": "0.5 x"}}, ":7: acc_runs: must be accuracies separated by spaces"),
    ({"bad": {"acc_runs": "0.5 1.3"}}, ":7: acc_runs: each repeat's accuracy must be in [0, 1]"),
    ({"bad": {"acc_se": "-0.1"}}, ":7: acc_se: must be >= 0"),
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
    with pytest.raises(ConfigError, match="--model"):
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
    assert ev["gap_se"] is None and ev["within_noise"] is None  # the table says nothing about its noise


def test_gap_to_the_best_is_paired_by_repeat_when_the_table_has_them(tmp_path):
    """Two sequences whose repeats move together differ by a small, sure gap; the same accuracies
    read as independent (acc_se only) cannot be told apart."""
    t = read_table(write_table(tmp_path / "t.csv", best=(1, 0, 3)))
    best, other = t.best().actions, (1, 0, 2)
    gap = t.rows[best].acc - t.rows[other].acc
    runs = {best: [0.80, 0.90, 0.70, 0.80], other: [0.79, 0.88, 0.69, 0.80]}  # differences 0.01 0.02 0.01 0
    paired = {s: {"acc_runs": " ".join(map(str, r)), "acc_se": 0.05} for s, r in runs.items()}
    rows = list(csv.DictReader(open(tmp_path / "t.csv")))
    for r in rows:
        r.update(paired.get((int(r["a1"]), int(r["a2"]), int(r["a3"])), {}))
    write_rows(tmp_path / "p.csv", rows, COLS + ["acc_runs", "acc_se"])
    tp = read_table(tmp_path / "p.csv")
    g, se = tp.gap(best, other)
    assert g == pytest.approx(gap) and se == pytest.approx(math.sqrt(0.0002 / 3 / 4))
    for r in rows:  # the same rows without their repeats: independent errors, sqrt(2) x 0.05
        r["acc_runs"] = ""
    write_rows(tmp_path / "u.csv", rows, COLS + ["acc_runs", "acc_se"])
    assert read_table(tmp_path / "u.csv").gap(best, other)[1] == pytest.approx(0.05 * math.sqrt(2))
    assert math.isnan(t.gap(best, other)[1])


def test_evaluate_says_whether_the_pick_is_within_the_noise(tmp_path, capsys):
    src = write_table(tmp_path / "src.csv", best=(2, 1, 3))
    dst = write_table(tmp_path / "dst.csv", best=(1, 0, 3))
    rows = list(csv.DictReader(open(dst)))
    for k, r in enumerate(rows):  # 3 repeats around each accuracy, spread unlike between rows (a noisy gap)
        r["acc_runs"] = " ".join(f"{float(r['acc']) + d * (1 + k % 3) / 1000:.5f}" for d in (-2, 0, 2))
    write_rows(dst, rows, COLS + ["acc_runs"])
    assert main(["adapt", "learn", str(src), "--episodes", "6000", "--seed", "3", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["adapt", "evaluate", str(tmp_path / "a"), str(dst)]) == 0
    ev = json.loads((tmp_path / "a" / "evaluation.json").read_text())[0]
    assert ev["sequence"] != ev["best_sequence"] and ev["gap_to_best"] > 0.05
    assert ev["gap_se"] > 0 and ev["within_noise"] is False
    assert "points below it" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.torch
def test_a_gradient_spike_does_not_lock_learning_onto_a_bad_sequence():
    """The convnet3 early-middle table (its first 4 repeats, results/adapt6) on which, without
    clipping, one update of norm 34 late in the schedule made seed 4 play the 54th sequence on the
    host the table was built on. Whether the unclipped run spikes depends on the CPU's floating-point
    kernels (on a later host it did not), so only the clipped learner's result is asserted."""
    from hetune.adapt.policy import greedy, learn
    t = read_table(REPO / "tests" / "data" / "convnet3-early-middle-4.csv")
    assert max(t.rank(greedy(learn([t], seed=seed)[0], t)) for seed in range(5)) <= 3


def test_clip_is_recorded_and_a_negative_one_refused(tmp_path, capsys):
    t = write_table(tmp_path / "t.csv")
    assert main(["adapt", "learn", str(t), "--clip", "-1", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "--clip" in err and "Traceback" not in err and not (tmp_path / "bad").exists()
    assert main(["adapt", "learn", str(t), "--episodes", "320", "--clip", "0", "--out", str(tmp_path / "p")]) == 0
    assert json.loads((tmp_path / "p" / "policy.json").read_text())["clip"] == 0.0


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


def test_fine_tuning_starts_from_the_policy_given_and_leaves_it_as_it_was(tmp_path, capsys):
    ta = write_table(tmp_path / "a.csv", best=(0, 0, 0))
    tb = write_table(tmp_path / "b.csv", best=(2, 2, 2))
    assert main(["adapt", "learn", str(ta), "--episodes", "4000", "--out", str(tmp_path / "pa")]) == 0
    source = (tmp_path / "pa" / "policy.pt").read_bytes()
    assert main(["adapt", "evaluate", str(tmp_path / "pa"), str(tb)]) == 0
    before = json.loads((tmp_path / "pa" / "evaluation.json").read_text())[0]
    for name, init in (("ft", ["--init", str(tmp_path / "pa")]), ("scratch", [])):
        assert main(["adapt", "learn", str(tb), "--episodes", "1000", "--seed", "1", *init,
                     "--out", str(tmp_path / name)]) == 0
    assert (tmp_path / "pa" / "policy.pt").read_bytes() == source  # the source is not touched
    meta = json.loads((tmp_path / "ft" / "policy.json").read_text())
    assert meta["init_sha256"] == json.loads((tmp_path / "pa" / "policy.json").read_text())["sha256"]
    assert meta["sha256"] != meta["init_sha256"]
    assert main(["adapt", "evaluate", str(tmp_path / "ft"), str(tb)]) == 0
    after = json.loads((tmp_path / "ft" / "evaluation.json").read_text())[0]
    assert after["policy_sha256"] == meta["sha256"]  # evaluate loads the fine-tuned policy, not its source
    assert before["rank"] > 3 and after["rank"] <= 3
    # the start matters: the same seed and episodes from a fresh initialisation learn another policy
    assert json.loads((tmp_path / "scratch" / "policy.json").read_text())["sha256"] != meta["sha256"]
    capsys.readouterr()
    assert main(["adapt", "learn", str(tb), "--init", str(tmp_path / "pa"), "--out", str(tmp_path / "pa")]) == 2
    assert "is the --init policy" in capsys.readouterr().err
    assert (tmp_path / "pa" / "policy.pt").read_bytes() == source
    assert main(["adapt", "learn", str(tb), "--init", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert "no policy.pt here" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_two_orders_of_the_same_deepenings_are_different_states(tmp_path):
    from hetune.adapt.policy import TableStates

    st = TableStates(read_table(write_table(tmp_path / "t.csv")))
    # rows 5 + a1 * 4 + a2: the states before the third decision
    assert not bool((st.x[5 + 0 * 4 + 1] == st.x[5 + 1 * 4 + 0]).all())


def test_simulator_consults_the_policy_when_a_trial_moves_to_a_faster_worker(tmp_path):
    from pathlib import Path

    from hetune.adapt.hook import PolicyHook
    from hetune.sim.engine import simulate
    from hetune.sim.hooks import MoveEffect
    from hetune.sim.loader import load_inputs

    t = write_table(tmp_path / "t.csv", best=(0, 0, 0))
    assert main(["adapt", "learn", str(t), "--episodes", "4000", "--out", str(tmp_path / "p")]) == 0
    hook = PolicyHook(Path(tmp_path / "p"))
    actions, factor = hook.on_up(0, 0.75)  # the table's time left at the first decision: 300 of 400 s
    assert actions == [0, 0, 0] and factor > 1.0

    class Recording:  # the engine's side: consulted on every move to a worker of another speed
        def __init__(self):
            self.calls = []

        def on_move(self, trial, from_step_s, to_step_s, frac):
            self.calls.append((trial, from_step_s, to_step_s, frac))
            return MoveEffect(1.5, "adapt", {"actions": [0]}) if to_step_s < from_step_s else None

    inputs = load_inputs(REPO / "configs/experiments/pbt-resnet18-cifar10.toml")
    rec = Recording()
    res = simulate(inputs, inputs.make_strategy("throughput-proportional"), 0, hooks=[rec])
    adapts = [e for e in res.events if e["kind"] == "adapt"]
    ups = [c for c in rec.calls if c[2] < c[1]]
    assert ups and len(adapts) == len(ups) and len(rec.calls) > len(ups)
    assert all(0.0 <= c[3] <= 1.0 for c in rec.calls)
    assert [e["step_factor"] for e in adapts if e["trial"] == adapts[0]["trial"]][:2] == [1.5, 2.25]
    last_step: dict = {}
    speed = {w.id: w.step_time_s for w in res.workers}
    moves = []
    for e in res.events:
        if e["kind"] == "chunk":
            if e["trial"] in last_step and speed[e["worker"]] != last_step[e["trial"]]:
                moves.append((e["trial"], last_step[e["trial"]], speed[e["worker"]]))
            last_step[e["trial"]] = speed[e["worker"]]
    assert sorted(moves) == sorted(c[:3] for c in rec.calls)  # calls come at chunk starts, chunks at their ends
    plain = simulate(inputs, inputs.make_strategy("throughput-proportional"), 0)
    assert not any(e["kind"] == "adapt" for e in plain.events)
    assert max(e["t"] for e in res.events) > max(e["t"] for e in plain.events)  # deeper models are slower


def test_a_policy_with_another_state_size_is_refused(tmp_path, capsys):
    import torch

    from hetune.adapt.policy import Policy

    (tmp_path / "old").mkdir()
    torch.save(Policy(features=25).state_dict(), tmp_path / "old" / "policy.pt")
    table = write_table(tmp_path / "t.csv")
    assert main(["adapt", "evaluate", str(tmp_path / "old"), str(table)]) == 2
    err = capsys.readouterr().err
    assert "policy.pt: policy takes 25 state features" in err and "learn it again" in err


def test_states_come_from_structure_so_unseen_layers_and_models_work(tmp_path):
    import torchvision
    from torch import nn

    from hetune.adapt.policy import FEATURES, state_features
    from hetune.adapt.net2net import SMALL_MODELS, deepen

    base = SMALL_MODELS["convnet2"]()
    plain = state_features(base, 200.0, 400.0, 0)
    # a layer type no table was built with (no vocabulary to miss): only the counts move
    odd = SMALL_MODELS["convnet2"]()
    odd.g1.append(nn.Sequential(nn.Dropout(0.1), nn.GELU()))
    seen = state_features(odd, 200.0, 400.0, 0)
    assert len(seen) == len(plain) == FEATURES and all(map(math.isfinite, seen))
    assert seen != plain
    deep = state_features(deepen(SMALL_MODELS["convnet2"](), 1), 200.0, 400.0, 0)
    assert deep != plain  # the block that grew is visible
    res = state_features(torchvision.models.resnet18(num_classes=10), 200.0, 400.0, 0)
    assert len(res) == FEATURES and all(map(math.isfinite, res))
    # a policy learned on convnet2 tables plays on a convnet3 table: its states differ, nothing breaks
    assert state_features(SMALL_MODELS["convnet3"](), 200.0, 400.0, 0) != plain
    t2 = write_table(tmp_path / "c2.csv", best=(1, 2, 3))
    t3 = write_table(tmp_path / "c3.csv", best=(1, 2, 3), model="convnet3")
    assert main(["adapt", "learn", str(t2), "--episodes", "4000", "--out", str(tmp_path / "p")]) == 0
    assert main(["adapt", "evaluate", str(tmp_path / "p"), str(t3)]) == 0
    ev = json.loads((tmp_path / "p" / "evaluation.json").read_text())[0]
    assert ev["table"] == str(t3) and 1 <= ev["rank"] <= 64 and len(ev["sequence"]) == 3
