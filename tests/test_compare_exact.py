"""What `hetune compare` must print for a committed real run (issue "Types a checker can read", item 5).

The run is results/fidelity/under-load/runs/tune-default-s0: a real Ray Tune run of tune-default
under the strategy adapter, judged with the inputs it froze. Every number below is the simulator's
prediction of that run: a change to the simulator that moves one (a new cost, a new staging rule)
must change this test on purpose, with the result it gives.
"""

from __future__ import annotations

import shutil

from conftest import REPO
from hetune.cli import main

RUN = REPO / "results/fidelity/under-load/runs/tune-default-s0"
EXPECTED = [
    "strategy tune-default, seed 0",
    "makespan: real 381.5 s, sim 416.5 s, error +9.2%",
    "seconds per iteration on cpu-fast: real 1.0106, sim 1.0049, error -0.6%",
    "seconds per iteration on cpu-slow: real 3.7126, sim 3.2581, error -12.2%",
    "replay of the real population (timing error only): makespan 358.3 s, error -6.1%; time to target error n/a",
    "makespan over 200 simulated seeds: median 421.0 s (355.6-486.5); error of the median +10.3%; real run within "
    "the simulated 95% range",
    "best accuracy of the run over 200 simulated seeds: median 0.496 (0.431-0.585), real 0.425; real run OUTSIDE "
    "the simulated 95% range",
    "how far to trust the accuracy range: the learning model (bell) carries no fitted uncertainty, so the range is "
    "its reading noise only, not what it does not know (docs/learning.md, 'How far to trust it')",
    "exploits: real 8, sim 7, replay 8",
    "share of iterations on cpu-fast: real 74%, sim 70%",
    "decisions: real 70 run / 0 retire, sim 74 run / 0 retire",
]


def test_compare_prints_these_numbers_for_the_committed_run(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)  # compare writes fidelity.json beside the run: not into the checkout
    assert main(["compare", str(run)]) == 0
    printed = capsys.readouterr().out.splitlines()
    for line in EXPECTED:
        assert line in printed, (line, printed)


def test_compare_says_a_fitted_model_draws_its_uncertainty(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(REPO / "results/pbt-accuracy/smoke/repeat-0", run)
    assert main(["compare", str(run), "--seeds", "39"]) == 0
    printed = capsys.readouterr().out
    assert "the learning model is fitted to real runs and each simulated seed draws from the fit's uncertainty" \
        in printed
    assert main(["compare", str(run), "--seeds", "39", "--set", "learning.draws=false"]) == 0
    assert "(skills) carries no fitted uncertainty" in capsys.readouterr().out
