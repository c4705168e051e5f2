"""Every figure function on small fixture results; reruns give the same files; no torch or ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, write_table
from hetune.cli import main


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
    assert main(["simulate", str(exp), "--strategy", "tune-default", "--seed", "1", "--out", str(root / "run")]) == 0
    assert main(["sweep", str(exp), "--strategies", "tune-default,leader-fusion,hrfs", "--seeds", "3", "--jobs", "1",
                 "--out", str(root / "sweep"), "--quiet"]) == 0
    return root


@pytest.fixture(autouse=True)
def drawn_texts(monkeypatch) -> dict[str, list[str]]:
    """Every figure these tests save is checked first: no text reaches outside it. Its texts are kept
    (file name -> texts) for the tests to read."""
    import matplotlib.figure
    import matplotlib.text

    from hetune.plots.style import texts_outside

    seen: dict[str, list[str]] = {}
    savefig = matplotlib.figure.Figure.savefig

    def checked(self, fname, *args, **kw):
        assert texts_outside(self) == [], fname
        seen[Path(fname).name] = [t.get_text() for t in self.findobj(matplotlib.text.Text) if t.get_visible()]
        return savefig(self, fname, *args, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", checked)
    return seen


def test_a_text_cut_off_at_the_edge_is_found():
    from hetune.plots.style import figure, texts_outside

    fig, ax = figure(3.0, 2.0)
    ax.plot([0, 1], [0, 1])
    assert texts_outside(fig) == []
    fig.text(0.9, 0.5, "a label running off the right edge")
    assert texts_outside(fig) == ["a label running off the right edge"]


def test_run_figures_read_at_a_glance(results, tmp_path, drawn_texts):
    assert main(["plots", str(results / "run"), "--out", str(tmp_path)]) == 0
    timeline = drawn_texts["run-timeline.png"]
    assert "k80 #0" in timeline and not any("k80 k80" in t for t in timeline)  # node named after its device
    population = drawn_texts["run-population.png"]
    assert not any("times" in t or "mathdefault" in t for t in population)  # lr ticks as plain numbers
    assert any("exploits" in t and "bottom edge" in t for t in population)


@pytest.mark.slow  # every figure twice: kept out of the fast subset
def test_every_figure_is_made_and_reruns_match(results, tmp_path, capsys):
    cal = REPO / "configs/calibration/reference.toml"
    args = ["plots", str(results / "run"), str(results / "sweep"), str(cal), "--out"]
    assert main(args + [str(tmp_path / "a"), "--pdf"]) == 0
    assert main(args + [str(tmp_path / "b"), "--pdf"]) == 0
    names_a = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names_a == sorted(p.name for p in (tmp_path / "b").iterdir())
    expected = {"run-timeline", "run-population", "run-utilization", "sweep-strategy-comparison", "sweep-speedup",
                "sweep-cost", "reference-calibration"}
    assert {n.rsplit(".", 1)[0] for n in names_a} == expected
    for p in (tmp_path / "a").iterdir():
        assert p.stat().st_size > 1000
    for n in names_a:  # timestamps are stripped, so the PNGs are byte-identical
        if n.endswith(".png"):
            assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()


def test_bad_inputs_are_named_and_others_still_made(results, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    trunc = tmp_path / "trunc"
    trunc.mkdir()
    text = (results / "run" / "events.jsonl").read_text()
    (trunc / "events.jsonl").write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + '\n{"t": 1.0, "ki')
    code = main(["plots", str(empty), str(trunc), str(results / "run"), "--out", str(tmp_path / "figs")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{empty}: no recognisable results" in err
    assert f"{trunc / 'events.jsonl'}:" in err and "truncated" in err
    assert (tmp_path / "figs" / "run-timeline.png").exists()


def test_plotting_never_imports_ray_or_torch():
    code = ("import sys, plots.cli, plots.run_figures, plots.sweep_figures, plots.calibration_figure; "
            "sys.exit(1 if any(m in sys.modules for m in ('torch', 'ray')) else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_fidelity_and_adaptation_figures(results, tmp_path):
    from hetune.plots.adapt_figure import adaptation
    from hetune.plots.fidelity_figure import fidelity
    from hetune.sim.events import read_events

    events = read_events(results / "run" / "events.jsonl")
    fid = {"strategy": "tune-default", "makespan_error_pct": -10.0, "time_to_target_error_pct": 5.0,
           "replay_makespan_error_pct": -8.0, "step_time_error_pct": {"k80": 3.0, "v100": -2.0},
           "exploits": {"real": 3, "sim": 4}}
    made = fidelity(events, events, fid, tmp_path, "f")
    table = write_table(tmp_path / "t.csv")
    history = [{"episodes": 128 * (i + 1), "mean_reward": i / 10} for i in range(30)]
    evals = [{"table": str(table), "rank": 2, "accuracy": 0.8, "no_adaptation_rank": 40}]
    made += adaptation(history, evals, tmp_path, "a")
    assert [p.name for p in made] == ["f-fidelity.png", "a-adaptation.png"]
    assert all(p.stat().st_size > 1000 for p in made)


def test_fidelity_benchmark_figure_from_the_committed_judgements(tmp_path, capsys):
    from hetune.plots.benchmark_figure import runs_by_strategy

    bench = REPO / "results/fidelity/spread"
    runs = runs_by_strategy(bench)
    assert sorted(runs) == ["hrfs", "leader-fusion", "random-search", "rank-aware", "throughput-proportional",
                            "tune-default", "tune-default-plain"] and all(len(v) == 2 for v in runs.values())
    assert main(["plots", str(bench), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "spread-fidelity-benchmark.png").stat().st_size > 1000
    broken = tmp_path / "broken" / "runs" / "hrfs-s0"
    broken.mkdir(parents=True)
    (broken / "fidelity.json").write_text("{not json")
    assert main(["plots", str(tmp_path / "broken"), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "fidelity.json" in err and "Traceback" not in err
