"""Where the simulator parts from a plain Ray Tune PBT run, with Ray's node placement as an input
(real/plain_divergence.py, sim/recorded_placement.py)."""

from __future__ import annotations

import json
import shutil

from conftest import REPO
from hetune.cli import main
from hetune.real.divergence import CAUSES
from hetune.real.plain_divergence import first_plain_divergence, placements, run_plain_divergence
from hetune.sim.events import make_event, read_events
from hetune.sim.recorded_placement import RecordedPlacement
from hetune.sim.strategies.base import IDLE, Run, Strategy

PLAIN = REPO / "results/fidelity/under-load/runs/tune-default-plain-s0"


def start(t: float, trial: int, worker: int, kind: str = "trial_start") -> dict:
    return make_event(t, kind, trial=trial, iteration=1, worker=worker, duration_s=0.0)


def chunk(t: float, trial: int, worker: int, iteration: int, accuracy: float) -> dict:
    return make_event(t, "chunk", trial=trial, iteration=iteration, accuracy=accuracy, worker=worker, iterations=10,
                      duration_s=5.0, eval_s=0.0)


def test_placements_that_agree_have_no_divergence():
    log = [start(1, 0, 0), start(1, 1, 1), chunk(6, 0, 0, 10, 0.2)]
    assert placements(log) == [(0, 0, 0), (1, 1, 1)]
    assert first_plain_divergence(log, log) == {"agreed": 2, "divergence": None}


def test_a_divergence_is_named_from_both_runs_state_before_it():
    real = [start(1, 0, 0), chunk(6, 0, 0, 10, 0.2), make_event(6, "pause", trial=0, iteration=10, worker=0),
            start(7, 1, 0)]
    sim = [start(1, 0, 0), chunk(5, 0, 0, 10, 0.2), start(6, 2, 1)]  # trial 0 not paused yet: still running
    got = first_plain_divergence(real, sim)
    assert got["agreed"] == 1 and got["divergence"]["cause"] == "a trial still saving or running"
    assert got["divergence"]["real"] == [0, {"run": 1}] and got["divergence"]["sim"] == [1, {"run": 2}]
    # the same state and the same trial on another worker: another worker
    got = first_plain_divergence([start(1, 0, 0)], [start(1, 0, 1)])
    assert got["divergence"]["cause"] == "another worker asked"
    # the same state, another trial: nothing the events show
    assert first_plain_divergence([start(1, 0, 0)], [start(1, 1, 0)])["divergence"]["cause"] == "unexplained"


class Picks(Strategy):
    """Always the trial it is given (a stand-in for Tune's choice)."""

    name = "picks"

    def __init__(self, trial: int) -> None:
        super().__init__(None)
        self.trial = trial

    def assign(self, worker, view):
        return Run(self.trial, 10)


class W:
    def __init__(self, wid: int, resident=None) -> None:
        self.id, self.resident = wid, resident


def test_the_recorded_worker_takes_the_trial_and_others_wait():
    placed = RecordedPlacement(Picks(3), [start(1, 3, 2), start(9, 3, 0, "resume")])
    assert placed.assign(W(0), None) is IDLE and placed.held == 1  # its first start was on worker 2
    assert placed.assign(W(2), None) == Run(3, 10)
    assert placed.assign(W(0), None) == Run(3, 10)  # its restart was on worker 0
    assert placed.assign(W(1), None) == Run(3, 10)  # no record left: wherever the strategy says
    assert placed.name == "picks"


class View:
    """Trials ``runnable`` can run now (peek passes over the skipped ones)."""

    def __init__(self, *runnable: int) -> None:
        self.runnable = runnable

    def peek(self, ordering, skip=None):
        return next((W(t) for t in self.runnable if t not in (skip or set())), None)


def test_a_worker_whose_pick_ran_elsewhere_takes_the_trial_the_run_started_on_it():
    record = [start(1, 3, 2), start(1, 4, 0)]
    assert RecordedPlacement(Picks(3), record).assign(W(0), View(3, 4)) == Run(4, 10)
    held = RecordedPlacement(Picks(3), record)
    assert held.assign(W(0), View(3)) is IDLE and held.held == 1  # trial 4 cannot run now: wait


def test_a_committed_plain_run_is_replayed_with_ray_s_placement_and_compare_keeps_it(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(PLAIN, run)
    got = run_plain_divergence(run)
    real = read_events(run / "events.jsonl")
    assert got["placing"]["real"] == sum(e["kind"] in ("trial_start", "resume") for e in real)
    assert 0 < got["agreed"] <= got["placing"]["real"]
    assert got["divergence"] is None or got["divergence"]["cause"] in CAUSES
    (run / "fidelity.json").unlink()
    assert main(["compare", str(run), "--seeds", "39"]) == 0
    assert "with the run's seconds and Ray's nodes" in capsys.readouterr().out
    assert json.loads((run / "fidelity.json").read_text())["decision_divergence"] == got
