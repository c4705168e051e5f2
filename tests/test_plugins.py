"""Your own strategies and learning models from files outside the package (issue "Your own code and Ray Tune's
vocabulary", item 1): the README's two snippets, loaded with --plugin or [plugins], through simulate, sweep
and compare; recorded by name and sha256; refused in one line where missing, changed, clashing or broken."""

from __future__ import annotations

import json
import re
import sys

import pytest

from conftest import REPO
from hetune.cli import main
from hetune.sim import learning, plugins, strategies


def _snippets() -> tuple[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    model = next(b for b in blocks if "class ExponentialApproach" in b)
    strategy = next(b for b in blocks if "class MostProgressedFirst" in b)
    return strategy, model


@pytest.fixture()
def user_files(tmp_path):
    strategy, model = _snippets()
    d = tmp_path / "mine"
    d.mkdir()
    (d / "mystrat.py").write_text(strategy)
    (d / "mymodel.py").write_text(model)
    yield d
    for name in ("mystrat", "mymodel", "clash", "broken"):  # as a fresh process would be
        sys.modules.pop(name, None)
        plugins.LOADED.pop(name, None)
    strategies.REGISTRY.pop("most-progressed-first", None)
    learning.REGISTRY.pop("exp-approach", None)


@pytest.mark.slow
def test_the_readme_snippets_run_from_your_files_and_compare_checks_them(user_files, tmp_path, capsys):
    flags = ["--plugin", str(user_files / "mystrat.py"), "--plugin", str(user_files / "mymodel.py")]
    run = tmp_path / "run"
    assert main(["simulate", "--strategy", "most-progressed-first", "--set", 'learning.kind="exp-approach"',
                 "--out", str(run)] + flags) == 0
    recorded = json.loads((run / "inputs.json").read_text())["plugins"]
    assert set(recorded) == {"mystrat", "mymodel"}
    assert str(user_files) not in (run / "config.toml").read_text()  # names, never the path
    sweep = tmp_path / "sweep"
    assert main(["sweep", "--strategies", "most-progressed-first,hrfs", "--seeds", "2", "--jobs", "2", "--quiet",
                 "--out", str(sweep)] + flags) == 0
    assert "most-progressed-first" in (sweep / "sweep.csv").read_text()
    capsys.readouterr()
    assert main(["compare", str(run), "--seeds", "40"] + flags) == 0
    with (user_files / "mymodel.py").open("a") as fh:
        fh.write("# edited\n")
    plugins.LOADED.pop("mymodel")  # a new process reads the edited file
    assert main(["compare", str(run), "--seeds", "40"] + flags) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plug-in 'mymodel'" in err and "changed since the run froze it" in err


def test_a_run_of_a_plugin_not_loaded_is_refused_with_what_to_pass(user_files, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["simulate", "--strategy", "most-progressed-first", "--out", str(run),
                 "--plugin", str(user_files / "mystrat.py")]) == 0
    sys.modules.pop("mystrat")
    plugins.LOADED.pop("mystrat")
    strategies.REGISTRY.pop("most-progressed-first")
    capsys.readouterr()
    assert main(["compare", str(run), "--seeds", "40"]) == 2
    err = capsys.readouterr().err.strip()
    assert "plug-in 'mystrat' is not importable here: pass --plugin" in err and len(err.splitlines()) == 1


def test_plugins_named_in_the_experiment_load_relative_to_it(user_files, tmp_path):
    exp = tmp_path / "exp.toml"
    base = (REPO / "configs/experiments/pbt-resnet18-cifar10.toml").read_text()
    base = base.replace('path = "../clusters/', f'path = "{REPO}/configs/clusters/')
    base = base.replace('path = "../calibration/', f'path = "{REPO}/configs/calibration/')
    base = base.replace('path = "../learning/', f'path = "{REPO}/configs/learning/')
    exp.write_text(base + '\n[plugins]\nmodules = ["mine/mystrat.py"]\n')
    assert main(["simulate", str(exp), "--strategy", "most-progressed-first", "--out", str(tmp_path / "r")]) == 0


@pytest.mark.parametrize("source, needle", [
    ("from hetune.sim.strategies import register\nfrom hetune.sim.strategies.hrfs import HRFS\n\n"
     "@register\nclass Clash(HRFS):\n    name = 'hrfs'\n", "strategy name 'hrfs' is empty or taken"),
    ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
])
def test_a_plugin_that_clashes_or_breaks_is_named_in_one_line(user_files, tmp_path, capsys, source, needle):
    bad = user_files / ("clash.py" if "Clash" in source else "broken.py")
    bad.write_text(source)
    assert main(["simulate", "--plugin", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--plugin" in err and bad.stem in err and needle in err
    assert not (tmp_path / "r").exists()


def test_an_installed_entry_point_is_loaded_only_when_its_name_is_unknown(user_files, tmp_path, monkeypatch):
    import importlib.metadata as md

    monkeypatch.syspath_prepend(str(user_files))
    asked: list[str] = []

    def entry_points(group: str):
        asked.append(group)
        return [md.EntryPoint("most-progressed-first", "mystrat:MostProgressedFirst", group)] \
            if group == "hetune.strategies" else []

    monkeypatch.setattr(plugins.importlib.metadata, "entry_points", entry_points)
    assert main(["simulate", "--strategy", "hrfs", "--out", str(tmp_path / "a")]) == 0
    assert asked == []  # a registered name looks nothing up
    assert main(["simulate", "--strategy", "most-progressed-first", "--out", str(tmp_path / "b")]) == 0
    assert asked == ["hetune.strategies"] and "mystrat" in plugins.LOADED
    assert "mystrat" in json.loads((tmp_path / "b" / "inputs.json").read_text())["plugins"]


@pytest.mark.slow
@pytest.mark.ray
def test_a_plugin_model_trains_in_every_ray_worker_and_compare_judges_it(user_files, tmp_path, capsys):
    """validate ships the plug-ins in the job's runtime_env (py_modules): Ray's own PBT runs the user's
    learning model in the model trainable of every worker, and compare judges the run with it."""
    smoke = REPO / "configs/experiments/smoke-local.toml"
    flags = ["--plugin", str(user_files / "mymodel.py")]
    out = tmp_path / "run"
    assert main(["validate", str(smoke), "--strategy", "tune-default", "--plain", "--out", str(out), "--quiet",
                 "--set", 'real.trainable="model"', "--set", "real.model_sleep=0",
                 "--set", 'learning.kind="exp-approach"'] + flags) == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2, 3}
    assert "mymodel" in json.loads((out / "inputs.json").read_text())["plugins"]
    capsys.readouterr()
    assert main(["compare", str(out)] + flags) == 0
