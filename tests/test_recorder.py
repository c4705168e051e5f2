"""The recorder's start and restart events: the iteration a trial starts from, as the simulator
writes it, whoever saw the result first; what a restarted driver redid (real/recorder.py)."""

from types import SimpleNamespace

import pytest

from hetune.real.recorder import EventLog, RecorderCallback
from hetune.sim.cluster import WorkerSpec

TRIAL = SimpleNamespace(trial_id="a1b2c_00000", config={"lr": 0.01})


def _log(journal=None):
    return EventLog([WorkerSpec("n", "cpu", 1)], checkpoint_interval=10, target_accuracy=0.99, stop_iterations=40,
                    journal=journal)


def _results(cb, first, last, pbt_first=True):
    """Results for iterations first..last; a PBT scheduler sees each one before the callback does."""
    for step in range(first, last + 1):
        if pbt_first:
            cb.log.state.setdefault(0, {"iteration": 0, "accuracy": None, "started": True}).update(
                iteration=step, accuracy=step / 100)
        cb.on_trial_result(0, [], TRIAL, {"step": step, "accuracy": step / 100, "step_s": 0.1, "eval_s": 0.0,
                                          "load_s": 0.0, "node": "n", "device": "cpu"})


@pytest.mark.parametrize("pbt_first", [True, False])
def test_a_start_and_a_resume_carry_the_iteration_the_trial_starts_from(pbt_first):
    cb = RecorderCallback(_log())
    cb.on_trial_start(0, [], TRIAL)
    _results(cb, 1, 10, pbt_first)
    cb._end(TRIAL, "pause")  # paused at its checkpoint
    cb.on_trial_start(0, [], TRIAL)
    _results(cb, 11, 12, pbt_first)
    start, resume = [e for e in cb.log.events if e["kind"] in ("trial_start", "resume")]
    assert (start["iteration"], start["accuracy"]) == (0, None)
    assert (resume["iteration"], resume["accuracy"]) == (10, 0.1)  # its checkpoint and the reading there
    assert [e["iteration"] for e in cb.log.events if e["kind"] == "chunk"] == [10]


@pytest.mark.parametrize("restored, lost", [(10, 0), (0, 10)])
def test_a_restarted_driver_records_only_the_work_redone(tmp_path, restored, lost):
    journal = tmp_path / "events.partial.jsonl"
    cb = RecorderCallback(_log(journal))
    cb.on_trial_start(0, [], TRIAL)
    _results(cb, 1, 14)  # a chunk at 10 is journaled; 11-14 are not, and are lost with the driver
    again = _log()
    again.resume_from(journal)
    cb = RecorderCallback(again)
    cb.on_trial_start(0, [], TRIAL)
    _results(cb, restored + 1, restored + 2)  # Tune restored it from its checkpoint at `restored`
    failures = [e for e in again.events if e["kind"] == "failure"]
    assert [f["lost_iterations"] for f in failures] == ([lost] if lost else [])
    resume = next(e for e in again.events if e["kind"] == "resume")
    assert resume["iteration"] == restored
