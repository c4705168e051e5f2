"""A noisy user model is deterministic, and a run cannot outgrow --max-events (issue "Your own code and Ray
Tune's vocabulary", item 2).

Ray Tune's own toy PBT problem (ray/tune/examples/pbt_example.py, PBTBenchmarkExample) written as a hetune
learning model: its accuracy climbs fastest at an lr that follows a triangle wave of the accuracy, with
uniform and Gaussian noise at every step, drawn from the trial's own stream (``noisy_advance``)."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim import learning
from hetune.sim.engine import simulate
from hetune.sim.errors import EventLimitReached
from hetune.sim.loader import load_inputs

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
SETS = ['learning.kind="pbt-example"', "pbt.mutations.lr.high=0.02", "experiment.target_accuracy=0.99"]


class PBTExample(learning.LearningModel):
    """Ray's PBTBenchmarkExample: the state is its accuracy in [0, 200], read as a fraction of 200."""

    name = "pbt-example"
    summary = "Ray Tune's pbt_example.py toy problem"
    noisy_advance = True

    def initial_state(self, rng: np.random.Generator) -> float:
        return 0.0

    def advance(self, state: float, config: dict, iterations: int, rng: np.random.Generator) -> float:
        lr, acc = float(config["lr"]), state
        for _ in range(iterations):
            optimal = 0.01 * acc / 100 if acc < 100 else 0.01 - 0.01 * (acc - 100) / 100
            optimal = min(0.01, max(0.001, optimal))
            q_err = max(lr, optimal) / min(lr, optimal)
            if q_err < 3:
                acc += (1.0 / q_err) * rng.random()
            elif lr > optimal:
                acc -= (q_err - 3) * rng.random()
            acc = max(0.0, acc + 2 * rng.normal())
        return min(acc, 200.0)

    def accuracy(self, state: float) -> float:
        return state / 200.0


@pytest.fixture(scope="module", autouse=True)
def registered():
    learning.register(PBTExample)
    yield
    learning.REGISTRY.pop("pbt-example", None)


def _events(seed: int, strategy: str = "tune-default") -> list[dict]:
    inputs = load_inputs(EXP, SETS)
    return simulate(inputs, inputs.make_strategy(strategy), seed).events


def test_the_same_seed_gives_the_same_events_and_exploits_stay_few():
    for strategy in ("tune-default", "hrfs"):
        first, again = _events(4, strategy), _events(4, strategy)
        assert json.dumps(first) == json.dumps(again)
        exploits = sum(e["kind"] == "exploit" for e in first)
        perturbations = 20 * 1000 // 50  # trials x perturbation points: an upper bound
        assert 0 < exploits < perturbations


@pytest.mark.slow
def test_200_seeds_finish_and_none_runs_away():
    counts = [len(_events(seed)) for seed in range(200)]
    assert max(counts) <= 10 * statistics.median(counts)


def test_a_run_past_max_events_stops_with_one_line_and_keeps_what_ran(tmp_path, capsys):
    inputs = load_inputs(EXP)
    with pytest.raises(EventLimitReached) as exc:
        simulate(inputs, inputs.make_strategy("throughput-proportional"), 1, max_events=500)
    assert len(exc.value.events) == 500
    out = tmp_path / "run"
    code = main(["simulate", "--strategy", "throughput-proportional", "--seed", "1", "--out", str(out),
                 "--max-events", "2830"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "passed --max-events 2,830" in err
    assert (out / "events.partial.jsonl").is_file() and not (out / "events.jsonl").exists()
    code = main(["sweep", "--strategies", "throughput-proportional", "--seeds", "2", "--out", str(tmp_path / "sw"),
                 "--max-events", "2830", "--quiet", "--jobs", "1"])
    assert code == 1 and "passed --max-events" in capsys.readouterr().err
