"""The strict decision replay (issue "Fidelity you can audit", item 2a): every view a strategy was
asked with is written down, and a fresh strategy object shown each one answers as recorded.

The real side (a recorded Ray Tune run per strategy, and one killed and resumed) is checked in
tests/test_validate.py; here the simulator's runs, a strategy that reads more than its view (which
the replay must catch), a resumed log, and a damaged log given to ``hetune compare``.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.strategies import names
from hetune.sim.strategies.base import IDLE, Ordering, Run, Strategy
from hetune.sim.view_log import VIEWS_FILE, FrozenView, ViewLog, read_view_log, replay

SMOKE = REPO / "configs/experiments/smoke-local.toml"
RUN = REPO / "results/fidelity/under-load/runs/tune-default-s0"  # a committed real run (no view log)


def _logged(tmp_path, strategy: str | Strategy, overrides: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    inputs = load_inputs(SMOKE, overrides)
    obj = inputs.make_strategy(strategy) if isinstance(strategy, str) else strategy
    simulate(inputs, obj, 3, view_log=ViewLog(tmp_path / VIEWS_FILE, obj.name, inputs.experiment.pbt.mode, "sim"))
    return read_view_log(tmp_path / VIEWS_FILE)


@pytest.mark.parametrize("overrides", [[], ["pbt.synch=true"], ['pbt.time_attr="time_total_s"',
                                                                 "pbt.perturbation_interval=30"]])
@pytest.mark.parametrize("strategy", names())
def test_every_strategy_answers_its_recorded_views_as_it_did(tmp_path, strategy, overrides):
    header, records = _logged(tmp_path, strategy, overrides)
    assert header["strategy"] == strategy and header["engine"] == "sim"
    runs = sum(r["kind"] == "assign" and isinstance(r["decision"], dict) for r in records)
    assert runs >= 4 and any(r["kind"] == "chunk" for r in records)  # every trial was placed, chunks told
    result = replay(load_inputs(SMOKE, overrides).make_strategy(strategy), records, header["mode"])
    assert result.asked >= runs and result.exact, result.first_mismatch


class KeepsTheFirstView(Strategy):
    """Reads a view it kept from its first question: live in an engine, frozen in a replay."""

    name = "test-keeps-first-view"

    def __init__(self, params: Any = None) -> None:
        super().__init__(params)
        self.first: Any = None

    def assign(self, worker, view):
        self.first = self.first or view
        t = view.peek(Ordering.LEAST_PROGRESSED)
        return IDLE if t is None else Run(t.id, 1 + self.first.remaining_iterations % 7)


def test_a_strategy_that_reads_more_than_its_view_is_caught(tmp_path):
    header, records = _logged(tmp_path, KeepsTheFirstView(), [])
    result = replay(KeepsTheFirstView(), records, header["mode"])
    assert not result.exact and result.first_mismatch is not None
    line, recorded, now = result.first_mismatch
    assert recorded != now
    assert json.loads((tmp_path / VIEWS_FILE).read_text().splitlines()[line - 1])["decision"] == recorded


class AlwaysIdle(Strategy):
    name = "test-always-idle"

    def assign(self, worker, view):
        return IDLE


def test_repeated_questions_are_one_counted_line_and_a_resumed_log_is_cut(tmp_path):
    (tmp_path / "run").mkdir()
    _, records = _logged(tmp_path / "run", "tune-default", [])  # views to ask with
    views = [FrozenView(r["view"], "max") for r in records if r["kind"] == "assign"][:2]
    log = ViewLog(tmp_path / VIEWS_FILE, AlwaysIdle.name, "max", "real")
    for _ in range(5):
        log.ask(AlwaysIdle(), views[0].workers[0], views[0], views[0].trials.values())
    assert log.flush() == 2  # the header, and one line asked 5 times
    assert read_view_log(tmp_path / VIEWS_FILE)[1][0]["times"] == 5
    log.ask(AlwaysIdle(), views[1].workers[1], views[1], views[1].trials.values())
    assert log.flush() == 3
    # a resumed run whose saved strategy had seen 2 lines: the log goes on from there
    again = ViewLog(tmp_path / VIEWS_FILE, AlwaysIdle.name, "max", "real", keep=2)
    assert again.lines == 2 and len(read_view_log(tmp_path / VIEWS_FILE)[1]) == 1
    assert replay(AlwaysIdle(), read_view_log(tmp_path / VIEWS_FILE)[1], "max").asked == 5


def test_compare_refuses_a_damaged_view_log_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    before = (run / "fidelity.json").read_bytes()
    header = '{"kind": "header", "format": 1, "strategy": "tune-default", "mode": "max"}\n'
    (run / VIEWS_FILE).write_text(header + '{"kind"\n')
    assert main(["compare", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and VIEWS_FILE in err[0] and "line 2" in err[0], err
    assert (run / "fidelity.json").read_bytes() == before  # nothing written
    (run / VIEWS_FILE).write_text('{"kind": "header", "format": 1, "strategy": "hrfs", "mode": "max"}\n')
    assert main(["compare", str(run)]) == 2
    assert "strategy 'hrfs'" in capsys.readouterr().err
