"""The learning model: every mechanism it models can change the outcome (schedules, exploit, PBT
itself, batch size through gradient noise), the maths is exact, and bad input gets one line."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.learning import LearningModel, register
from hetune.sim.loader import load_inputs
from hetune.sim.nqm import NQM, NQMParams, NQMState, schedule_accuracy

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
NQM_SET = ['learning.kind="nqm"']  # the default experiment's NQM, kept beside its fitted skills model
LRS = np.geomspace(1e-3, 2.0, 40)
MOMENTA = (0.8, 0.9, 0.99)  # the default experiment's choices


def shipped() -> NQM:
    inputs = load_inputs(EXP, NQM_SET)
    assert inputs.experiment.learning.kind == "nqm"
    return inputs.make_learning_model()


def test_a_schedule_beats_every_constant_configuration():
    model = shipped()
    best_constant = max(schedule_accuracy(model, [(lr, m, 1000)]) for lr in LRS for m in MOMENTA)
    # one lr drop by 10x, the oldest schedule there is (He et al.'s), at 70% of the budget
    best_drop = max(schedule_accuracy(model, [(lr, 0.9, 700), (lr / 10, 0.9, 300)]) for lr in LRS)
    assert best_drop > best_constant + 0.03, (best_drop, best_constant)


def test_exploit_rescues_a_trial():
    # A trial stuck at a tiny lr copies a good trial's checkpoint: it is as good as the donor at
    # once, and trains on from there (explore's new lr applies from the next chunk).
    model = shipped()
    rng = np.random.default_rng(0)
    slow, good = model.initial_state(rng), model.initial_state(rng)
    slow = model.advance(slow, {"lr": 1e-4, "momentum": 0.9}, 500)
    good = model.advance(good, {"lr": 0.1, "momentum": 0.9}, 500)
    assert model.accuracy(slow) < 0.3 < 0.7 < model.accuracy(good)
    rescued = good  # exploit: the donor's state, luck included
    after = model.advance(rescued, {"lr": 0.08, "momentum": 0.9}, 100)
    assert model.accuracy(after) > model.accuracy(good) - 0.01 and after.luck == good.luck
    # in the simulator: some exploited trial reads far better after its exploit than before it
    inputs = load_inputs(EXP, NQM_SET)
    events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
    gains = []
    for ex in (e for e in events if e["kind"] == "exploit"):
        before = [e["accuracy"] for e in events if e["kind"] == "chunk" and e["trial"] == ex["trial"]
                  and e["t"] <= ex["t"] and e["accuracy"] is not None]
        after = [e["accuracy"] for e in events if e["kind"] == "chunk" and e["trial"] == ex["trial"]
                 and e["t"] > ex["t"] and e["accuracy"] is not None]
        if before and after:
            gains.append(after[0] - before[-1])
    assert gains and max(gains) > 0.2


def test_switching_pbt_off_changes_the_run():
    # Trials train to their stop iteration (a budget); the best trial's noise-free final accuracy
    # with PBT and with its perturbation interval at the stop iteration (no exploit, no explore).
    budget = ["experiment.budget_s=600"]
    for seed in range(3):
        final = {}
        for name, extra in (("on", []), ("off", ["pbt.perturbation_interval=1000"])):
            inputs = load_inputs(EXP, NQM_SET + budget + extra)
            res = simulate(inputs, inputs.make_strategy("tune-default"), seed)
            model = inputs.make_learning_model()
            final[name] = max(model.accuracy(t.progress) for t in res.trials)
            exploits = sum(e["kind"] == "exploit" for e in res.events)
            assert (exploits == 0) == (name == "off")
        assert abs(final["on"] - final["off"]) > 0.02, final


def iterations_to(model: NQM, accuracy: float) -> int:
    """Fewest iterations (in steps of 10) any constant lr (momentum 0.9) needs to reach ``accuracy``."""
    best = 10**9
    for lr in LRS:
        state = model.initial_state(np.random.default_rng(0))
        for k in range(1, 400):
            state = model.advance(state, {"lr": lr, "momentum": 0.9}, 10)
            if model.accuracy(state) >= accuracy:
                best = min(best, 10 * k)
                break
    return best


def test_batch_size_acts_through_gradient_noise():
    p = shipped().params
    steps = {b: iterations_to(NQM(p, b, 10_000), 0.8) for b in (128, 512, 8192, 32768)}
    # below the critical batch 4x the batch saves most iterations; far above it, little
    assert steps[512] < 0.5 * steps[128]
    assert steps[32768] > 0.6 * steps[8192]
    # without gradient noise the batch changes nothing at all
    quiet = NQMParams(noise=0.0)
    assert iterations_to(NQM(quiet, 128, 10_000), 0.8) == iterations_to(NQM(quiet, 8192, 10_000), 0.8)


def test_divergence_follows_from_the_model():
    model = shipped()
    h_max = model.params.curvature_max
    for m in (0.0, 0.9):
        edge = 2 * (1 + m) / h_max
        start = model.initial_state(np.random.default_rng(0))
        stable = model.advance(start, {"lr": 0.95 * edge, "momentum": m}, 200)
        broken = model.advance(start, {"lr": 1.05 * edge, "momentum": m}, 200)
        assert not stable.diverged and model.relative_loss(stable) < 10  # noisy near the edge, but bounded
        assert broken.diverged and model.accuracy(broken) == model.params.chance_accuracy
        # a diverged network stays diverged at a good lr, and nothing in it is NaN
        later = model.advance(broken, {"lr": 0.01, "momentum": m}, 1000)
        assert later.diverged and model.accuracy(later) == model.params.chance_accuracy
        assert np.isfinite(later.moments).all()


@pytest.mark.parametrize("lr,m", [(0.3, 0.9), (0.05, 0.0), (0.8, 0.5), (1.0, 0.99)] +
                         # critical damping of the flattest and steepest direction: (1 - sqrt(lr h))^2 = m
                         [(0.1, (1 - np.sqrt(0.1 * h)) ** 2)
                          for h in (NQMParams().curvature_min, NQMParams().curvature_max)])
def test_a_chunk_is_exactly_its_iterations_one_by_one(lr, m):
    model = shipped()
    start = model.advance(model.initial_state(np.random.default_rng(0)), {"lr": 0.2, "momentum": 0.9}, 37)
    one = start
    for _ in range(64):
        one = model.advance(one, {"lr": lr, "momentum": m}, 1)
    chunk = model.advance(start, {"lr": lr, "momentum": m}, 64)
    np.testing.assert_allclose(chunk.moments, one.moments, rtol=1e-9, atol=1e-12)


def test_the_moments_are_pytorchs_momentum_sgd_on_the_quadratic():
    # Monte Carlo of torch.optim.SGD's update rule (buf = m buf + g; theta -= lr buf), lr changed
    # midway as an explore does: the closed form matches the sampled second moments.
    p = NQMParams(dims=3, curvature_max=1.0, curvature_min=0.1, noise=20.0)
    model = NQM(p, 16, 10_000)
    rng = np.random.default_rng(1)
    n = 200_000
    theta = rng.normal(size=(n, 3)) / np.sqrt(model.h)  # E theta^2 = 1 / h, as the model starts
    buf = np.zeros((n, 3))
    state = model.initial_state(rng)
    for lr, m, k in ((0.5, 0.9, 20), (0.05, 0.9, 15)):
        for _ in range(k):
            g = model.h * theta + rng.normal(size=(n, 3)) * np.sqrt(model.sigma2)
            buf = m * buf + g
            theta = theta - lr * buf
        state = model.advance(state, {"lr": lr, "momentum": m}, k)
    sampled = np.stack([(theta ** 2).mean(0), (theta * buf).mean(0), (buf ** 2).mean(0)])
    for row in range(3):  # E theta b is near zero in some directions: its tolerance is the row's scale
        np.testing.assert_allclose(state.moments[row], sampled[row], rtol=0.03, atol=0.03 * np.abs(sampled[row]).max())


def test_states_are_immutable_so_checkpoints_can_share_them():
    model = shipped()
    s = model.initial_state(np.random.default_rng(0))
    with pytest.raises(ValueError):
        s.moments[0, 0] = 1.0
    t = model.advance(s, {"lr": 0.1, "momentum": 0.9}, 10)
    assert isinstance(t, NQMState) and not t.moments.flags.writeable and t is not s


def test_the_bell_model_is_still_there_and_schedules_do_not_help_it():
    inputs = load_inputs(EXP, ['learning.kind="bell"'])
    bell = inputs.make_learning_model()
    assert bell.name == "bell"
    state = bell.initial_state(np.random.default_rng(0))
    best_constant = max(bell.accuracy(bell.advance(state, {"lr": lr, "momentum": 0.9}, 1000)) for lr in LRS)
    best_drop = max(bell.accuracy(bell.advance(bell.advance(state, {"lr": lr, "momentum": 0.9}, 700),
                                               {"lr": lr / 10, "momentum": 0.9}, 300)) for lr in LRS)
    assert best_drop <= best_constant + 1e-12


@pytest.mark.parametrize("key,value,named", [
    ("learning.nqm.dims", "0", "learning.nqm.dims"),
    ("learning.nqm.curvature_min", "-1", "learning.nqm.curvature_min"),
    ("learning.nqm.noise", "-0.5", "learning.nqm.noise"),
    ("learning.nqm.max_accuracy", "0.05", "learning.nqm.max_accuracy"),
    ("learning.nqm.curvature_min", "9", "learning.nqm.curvature_min"),
    ("learning.kind", '"quadratic"', "learning.kind"),
    ("learning.nqm.slope", "nan", "learning.nqm.slope"),
])
def test_learning_parameters_outside_their_domain_are_refused(tmp_path, capsys, key, value, named):
    out = tmp_path / "run"
    assert main(["simulate", str(EXP), "--set", f"{key}={value}", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the flag that put the value there is named, not the installed experiment file
    assert len(err) == 1 and named in err[0] and f"--set {key}={value}" in err[0]
    assert not out.exists()


class _Flaky(LearningModel):
    """A user's model that goes wrong at a chosen iteration."""

    summary = "test model"
    fail_at = 200
    bad: object = float("nan")

    def initial_state(self, rng):
        return 0

    def advance(self, state, config, iterations):
        return state + iterations

    def accuracy(self, state):
        return self.bad if state >= self.fail_at else min(0.5, state / 1000)


@register
class _ReturnsNaN(_Flaky):
    name = "test-returns-nan"


@register
class _Raises(_Flaky):
    name = "test-raises"

    def accuracy(self, state):
        if state >= self.fail_at:
            raise ZeroDivisionError("boom")
        return 0.1


@pytest.mark.parametrize("kind,says", [("test-returns-nan", "returned accuracy nan"),
                                       ("test-raises", "ZeroDivisionError: boom")])
def test_a_users_model_that_fails_is_named_with_trial_and_iteration(tmp_path, capsys, kind, says):
    out = tmp_path / "run"
    assert main(["simulate", str(EXP), "--set", f'learning.kind="{kind}"', "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"learning model '{kind}'" in err[0] and says in err[0]
    assert "for trial" in err[0] and "at iteration 200" in err[0]
    partial = (out / "events.partial.jsonl").read_text().splitlines()
    assert partial and all(json.loads(line)["t"] >= 0 for line in partial)  # what ran before it is kept
    assert not (out / "summary.json").exists()


def test_a_users_model_runs_in_the_engine():
    @register
    class Linear(LearningModel):
        """Accuracy grows linearly with lr-weighted iterations, capped: no noise."""

        name = "test-linear"
        summary = "test"

        def initial_state(self, rng):
            return 0.0

        def advance(self, state, config, iterations):
            return state + iterations * min(config["lr"], 0.5)

        def accuracy(self, state):
            return min(0.9, 0.1 + state / 500)

    inputs = load_inputs(EXP, ['learning.kind="test-linear"'])
    events = simulate(inputs, inputs.make_strategy("hrfs"), 1).events
    accs = [e["accuracy"] for e in events if e["kind"] == "chunk" and e["accuracy"] is not None]
    assert min(accs) >= 0.1 and max(accs) >= inputs.experiment.experiment.target_accuracy


def test_every_momentum_choice_and_lr_of_the_default_experiment_keeps_the_model_finite():
    model = shipped()
    state = model.initial_state(np.random.default_rng(0))
    for lr, m in itertools.product((1e-4, 0.01, 0.3, 1.0), MOMENTA):
        s = model.advance(state, {"lr": lr, "momentum": m}, 1000)
        assert np.isfinite(s.moments).all() and 0.1 <= model.accuracy(s) <= 0.95


def test_time_attr_time_total_s_perturbs_slow_trials_after_fewer_iterations():
    def first_exploit_iteration_by_device(extra):
        inputs = load_inputs(EXP, extra)
        events = simulate(inputs, inputs.make_strategy("tune-default"), 0).events
        out: dict[str, int] = {}
        for ex in (e for e in events if e["kind"] == "exploit"):
            ran_on = [c["device"] for c in events
                      if c["kind"] == "chunk" and c["trial"] == ex["trial"] and c["t"] <= ex["t"]]
            out[ran_on[-1]] = min(out.get(ran_on[-1], 10**9), ex["iteration"])
        return out

    by_iteration = first_exploit_iteration_by_device([])
    # every exploit happens at a perturbation point, a multiple of 50 iterations whatever the device
    assert by_iteration and all(v % 50 == 0 for v in by_iteration.values())
    by_time = first_exploit_iteration_by_device(['pbt.time_attr="time_total_s"', "pbt.perturbation_interval=60"])
    assert by_time["k80"] < by_time["v100"]  # 60 s of a K80 is far fewer iterations than 60 s of a V100


def test_an_unsupported_time_attr_is_refused_naming_the_allowed_values(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(EXP), "--set", 'pbt.time_attr="wall_s"', "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pbt.time_attr" in err[0] and "'training_iteration', 'time_total_s'" in err[0]
    assert not out.exists()
