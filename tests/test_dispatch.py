"""Dispatch costs O(1) questions per chunk (issue "The engine: O(1) per event again", items 1-2).

Counted, not timed: a run on 4,096 GPUs is stopped as soon as the strategy has answered Idle more
than ``IDLE_PER_CHUNK`` times per chunk (plus one per trial, for the workers a stopped trial frees),
so a dispatch that asks every idle worker again fails in a fraction of a second. Each strategy's idle
groups (``Strategy.idle_group``) are checked by asking every worker they let the engine skip, and by
comparing every event with a run that asks every idle worker.
"""

from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w

from conftest import REPO
from hetune.sim.engine import Simulation
from hetune.sim.loader import RunInputs, load_inputs
from hetune.sim.state import SimulationError
from hetune.sim.strategies import names
from hetune.sim.strategies.base import Decision, Idle, IDLE, Ordering, Run, SimView, Strategy, WorkerView
from hetune.sim.view_log import Direct

EXP = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
IDLE_PER_CHUNK = 4  # tune-default answers about 2.7 (a chunk's worker, one pass, one after a start)


class QuestionCapReached(Exception):
    pass


class CountingAsker(Direct):
    """Counts the questions and chunks an engine reports; raises once Idle answers pass the cap."""

    def __init__(self, population: int) -> None:
        self.population = population
        self.questions = self.idle = self.chunks = 0

    def ask(self, strategy, worker, view, trials) -> Decision:
        decision = super().ask(strategy, worker, view, trials)
        self.questions += 1
        if isinstance(decision, Idle):
            self.idle += 1
            if self.idle > IDLE_PER_CHUNK * self.chunks + self.population:
                raise QuestionCapReached(f"{self.idle} Idle answers after {self.chunks} chunks")
        return decision

    def chunk(self, strategy, worker, trial, iterations, seconds, view, trials) -> None:
        super().chunk(strategy, worker, trial, iterations, seconds, view, trials)
        self.chunks += 1


@pytest.fixture(scope="module")
def scale_inputs(tmp_path_factory) -> RunInputs:
    """100 trials of the default experiment on 4,096 GPUs (1,024 nodes of gavel-12's three types)."""
    d = tmp_path_factory.mktemp("scale")
    cluster = tomllib.loads((REPO / "configs/clusters/gavel-12.toml").read_text())
    for node in cluster["nodes"]:
        node["count"] = 1024 // 3 + (1 if node["device"] == "v100" else 0)
    (d / "cluster.toml").write_text(tomli_w.dumps(cluster))
    return load_inputs(EXP, [f"cluster.path={d}/cluster.toml", "experiment.population=100"])


@pytest.mark.parametrize("strategy", names())
def test_questions_per_chunk_stay_constant_on_4096_gpus(scale_inputs, strategy):
    asker = CountingAsker(100)
    sim = Simulation(scale_inputs, scale_inputs.make_strategy(strategy), 0, view_log=asker)
    assert sum(w.devices for w in sim.workers) >= 4000
    sim.run()
    assert asker.chunks > 1000
    assert asker.idle <= IDLE_PER_CHUNK * asker.chunks + 100


def test_the_count_catches_a_dispatch_that_asks_every_idle_worker(scale_inputs):
    """Without its idle groups tune-default is asked by all 4,096 workers at every pass: the cap stops it."""
    asker = CountingAsker(100)
    sim = Simulation(scale_inputs, scale_inputs.make_strategy("tune-default"), 0, view_log=asker)
    sim.hints = "off"
    with pytest.raises(QuestionCapReached):
        sim.run()
    assert asker.chunks <= 150  # stopped in its first rounds of 100 chunks, not after the 1,257 of the run


def _events(inputs: RunInputs, strategy: str | Strategy, seed: int, hints: str) -> str:
    s = inputs.make_strategy(strategy) if isinstance(strategy, str) else strategy
    sim = Simulation(inputs, s, seed)
    sim.hints = hints
    return json.dumps(sim.run().events)


@pytest.mark.parametrize("strategy", names())
def test_idle_groups_hold_and_change_no_event(strategy):
    inputs = load_inputs(EXP)
    off = _events(inputs, strategy, 0, "off")
    assert _events(inputs, strategy, 0, "verify") == off
    assert _events(inputs, strategy, 0, "use") == off


SETTINGS = {
    "mixed": ["cluster.path=configs/clusters/mixed-small.toml"],
    "hrfs-lab": ["cluster.path=configs/clusters/hrfs-lab.toml"],
    "gavel-108, 40 trials": ["cluster.path=configs/clusters/gavel-108.toml", "experiment.population=40"],
    "faults": ["faults.devices.v100.mtbf_s=300", "faults.devices.v100.replace_s=30",
               "faults.devices.k80.mtbf_s=200", "faults.devices.k80.replace_s=20"],
    "synch": ["pbt.synch=true"],
    "time_total_s": ['pbt.time_attr="time_total_s"', "pbt.perturbation_interval=60"],
    "2 GPUs a trial, target early": ["strategies.tune-default.gpus_per_trial=2", "experiment.target_accuracy=0.6"],
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("strategy", names())
def test_idle_groups_hold_on_other_clusters_and_settings(setting, strategy):
    inputs = load_inputs(EXP, SETTINGS[setting])
    for seed in range(3):
        assert _events(inputs, strategy, seed, "verify") == _events(inputs, strategy, seed, "off"), seed


class WrongGroups(Strategy):
    """Claims every worker is alike but sends only even-numbered workers to work."""

    name = "wrong-groups"

    def assign(self, worker: WorkerView, view: SimView) -> Decision:
        t = view.peek(Ordering.LEAST_PROGRESSED)
        return IDLE if t is None or worker.id % 2 else Run(t.id, view.interval)

    def idle_group(self, worker: WorkerView, view: SimView) -> int:
        return 0


def test_a_false_promise_is_named_by_the_check():
    inputs = load_inputs(EXP)
    sim = Simulation(inputs, WrongGroups(), 0)
    sim.hints = "verify"
    with pytest.raises(SimulationError, match="idle_group promised worker 2 the Idle answer worker 1 got"):
        sim.run()


def test_a_strategy_without_groups_is_asked_by_every_idle_worker():
    class NoGroups(WrongGroups):
        idle_group = Strategy.idle_group  # type: ignore[assignment]

    inputs = load_inputs(EXP)
    asked: list[int] = []

    class Recorder(Direct):
        def ask(self, strategy, worker, view, trials):
            asked.append(worker.id)
            return super().ask(strategy, worker, view, trials)

    Simulation(inputs, NoGroups(), 0, view_log=Recorder()).run()
    assert asked[:12] == list(range(12))  # the first pass: every worker, odd ones Idle included
