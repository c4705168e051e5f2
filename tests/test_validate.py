"""validate/compare: a real Ray Tune PBT smoke run on the emulated local cluster, fault tolerance, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, FastestOnly, kill_session, ray_head_process
from hetune.sim import strategies as strategy_registry
from hetune.sim.engine import simulate
from hetune.sim.loader import load_inputs
from hetune.sim.strategies import names as strategy_names
from hetune.sim.strategies import register
from hetune.cli import main
from hetune.sim.events import read_events
from hetune.sim.view_log import VIEWS_FILE, read_view_log, replay

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.torch]  # real Ray Tune runs: minutes

SMOKE = REPO / "configs/experiments/smoke-local.toml"
SMALL_BATCH = ["--set", "experiment.batch_size=4"]  # the CIFAR ResNet-18 on one core: about 0.13 s a step


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "run"
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(out), "--quiet"]) == 0
    return out


def _replays_exactly(out, strategy: str, overrides: list[str]) -> int:
    """Questions of a real run's view log that a fresh strategy object answered as recorded (all of them)."""
    header, records = read_view_log(out / VIEWS_FILE)
    assert header["strategy"] == strategy and header["engine"] == "real"
    result = replay(load_inputs(SMOKE, overrides).make_strategy(strategy), records, header["mode"])
    assert result.exact, result.first_mismatch
    return result.asked


def test_smoke_run_completes_with_exploits_in_the_event_schema(smoke):
    events = read_events(smoke / "events.jsonl")  # validates every line against the schema
    summary = json.loads((smoke / "summary.json").read_text())
    assert summary["kind"] == "real" and summary["strategy"] == "tune-default"
    # the inputs it will be judged with were frozen before Ray started, and are unchanged since
    assert json.loads((smoke / "inputs.json").read_text())["frozen"] == "before the run started"
    stops = {e["trial"] for e in events if e["kind"] == "stop"}
    assert stops == {0, 1, 2, 3}
    # real digits: 40 iterations of batch 8 see 320 images; well above chance (0.1) all the same
    assert summary["best_accuracy"] > 0.2
    exploits = [e for e in events if e["kind"] == "exploit"]
    assert exploits, "4 trials, quantile 1: the bottom trial clones the top one at a perturbation point"
    continued = 0
    for ex in exploits:
        assert ex["iteration"] % 10 == 0
        # the exploited trial continues from the donor's checkpoint: its next chunk ends one
        # interval after the donor's checkpointed iteration, not after its own
        nxt = [e for e in events if e["kind"] == "chunk" and e["trial"] == ex["trial"] and e["t"] > ex["t"]]
        if nxt:
            assert nxt[0]["iteration"] == ex["donor_iteration"] + 10
            continued += 1
    assert continued >= 1  # at least one exploited trial trained on (the check above ran)
    # Ray's PBT's decisions, with what it saw: every exploit drew its donor from the upper quantile
    # of a ranking just made, and its explore's operations are those Ray reported
    decisions = [json.loads(line) for line in (smoke / "pbt-decisions.jsonl").read_text().splitlines()]
    ranks = [d for d in decisions if d["kind"] == "rank"]
    assert ranks and all(set(r["lower"]).isdisjoint(r["upper"]) for r in ranks)
    # Ray ranks only trials scored at a perturbation point: one alone has no quantiles
    assert all(bool(r["lower"]) == bool(r["upper"]) == (len(r["scores"]) >= 2) for r in ranks)
    donors = [d for d in decisions if d["kind"] == "donor"]
    assert [(d["trial"], d["donor"]) for d in donors] == [(e["trial"], e["donor"]) for e in exploits]
    assert all(d["donor"] in d["candidates"] for d in donors)
    explores = [e for e in events if e["kind"] == "explore"]
    assert [e["operations"] for e in explores] == [d["operations"] for d in decisions if d["kind"] == "explore"]
    assert all(set(e["operations"]) == {"lr", "momentum"} for e in explores)
    devices = {e["device"] for e in events if e["kind"] == "chunk"}
    assert devices == {"cpu-fast", "cpu-slow"}


def test_compare_reports_the_makespan_error(smoke, capsys):
    assert main(["compare", str(smoke)]) == 0
    out = capsys.readouterr().out
    assert "makespan: real" in out and "judged with the run's frozen inputs" in out
    fid = json.loads((smoke / "fidelity.json").read_text())
    # a fresh run on a busy host has no exact error to expect: tests/test_compare_exact.py pins what
    # compare prints for a committed run; here only that it judged this one
    assert isinstance(fid["makespan_error_pct"], float)
    assert set(fid["step_time_error_pct"]) == {"cpu-fast", "cpu-slow"}
    shares = fid["iteration_share"]
    assert set(shares) == {"cpu-fast", "cpu-slow"}
    assert sum(v["real"] for v in shares.values()) == pytest.approx(1, abs=1e-3)
    assert fid["decisions"]["real"]["run"] > 0 and fid["decisions"]["sim"]["run"] > 0
    assert "share of iterations on cpu-fast" in out
    r = fid["strategy_replay"]  # the run's strategy, asked again with each view it recorded
    assert r["asked"] == r["matched"] > 0 and f"strategy replay: {r['asked']} of {r['asked']} questions" in out


def test_rank_aware_moves_trials_between_device_types(tmp_path):
    out = tmp_path / "ra"
    assert main(["validate", str(SMOKE), "--strategy", "rank-aware", "--out", str(out), "--quiet",
                 "--set", "experiment.stop_iterations=30", *SMALL_BATCH]) == 0
    events = read_events(out / "events.jsonl")
    devices: dict[int, set] = {}
    for e in events:
        if e["kind"] == "chunk":
            devices.setdefault(e["trial"], set()).add(e["device"])
    # the strategy re-places trials by rank: some trial ran on both types
    assert any(len(d) == 2 for d in devices.values()), devices
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2, 3}


def test_killed_trial_resumes_from_its_last_checkpoint(tmp_path):
    out = tmp_path / "fault"
    code = main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(out), "--quiet",
                 "--set", "experiment.population=2", "--set", "experiment.stop_iterations=20",
                 "--set", "real.fail_once_at_step=15", *SMALL_BATCH])
    assert code == 0
    events = read_events(out / "events.jsonl")
    failures = [e for e in events if e["kind"] == "failure"]
    assert {e["trial"] for e in failures} == {0, 1}
    assert all(e["lost_iterations"] <= 10 for e in failures)
    for t in (0, 1):
        chunks = [e["iteration"] for e in events if e["kind"] == "chunk" and e["trial"] == t]
        assert chunks == [10, 20]  # restarted from the checkpoint at 10, not from scratch
        assert any(e["kind"] == "stop" and e["trial"] == t for e in events)


CIFAR = ["--set", 'experiment.dataset="cifar10"']  # real CIFAR: hetune ships none, the user names its folder


def test_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "best" looks for sweeps under ./results
    cases = [
        (["--strategy", "magic"], "unknown strategy 'magic'"),
        (["--strategy", "hrfs", "--plain"], "--plain: is Ray Tune's own scheduling"),
        (["--strategy", "tune-default", *CIFAR, "--data-dir", "/nonexistent/cifar"],
         "no cifar10 python folder at /nonexistent/cifar/cifar-10-batches-py"),
        (["--strategy", "tune-default", *CIFAR], "--data-dir: name the folder"),
        (["--strategy", "best"], "no sweep of experiment 'smoke-local'"),
    ]
    for args, needle in cases:
        out = tmp_path / "x"
        code = main(["validate", str(SMOKE), "--out", str(out), "--quiet"] + args)
        err = capsys.readouterr().err
        assert code == 2 and needle in err, (args, err)
        assert not out.exists()


@pytest.fixture
def ray_head(ray_address_file):
    """A bare local Ray head (1 CPU, no device resources, no authentication) at 127.0.0.1:6391."""
    with ray_head_process(6391, dict(os.environ, RAY_AUTH_MODE="disabled")) as address:
        yield address


def test_strategy_needing_device_types_the_ray_cluster_lacks(tmp_path, capsys, ray_head):
    code = main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(tmp_path / "x"),
                 "--quiet", "--address", ray_head])
    err = capsys.readouterr().err
    assert code == 2 and "needs device type(s) cpu-fast, cpu-slow that the Ray cluster lacks" in err


def test_sweep_cells_run_as_ray_tasks_on_an_existing_cluster(tmp_path, capsys, ray_head):
    exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
    out = tmp_path / "sw"
    assert main(["sweep", str(exp), "--strategies", "tune-default,hrfs", "--seeds", "2", "--out", str(out),
                 "--address", ray_head, "--quiet"]) == 0
    local = tmp_path / "local"
    assert main(["sweep", str(exp), "--strategies", "tune-default,hrfs", "--seeds", "2", "--out", str(local),
                 "--jobs", "1", "--quiet"]) == 0
    assert (out / "sweep.csv").read_text() == (local / "sweep.csv").read_text()  # same cells, same results


def test_sensitivity_worlds_run_as_ray_tasks_on_an_existing_cluster(tmp_path, capsys, ray_head):
    exp = REPO / "configs/experiments/pbt-resnet18-cifar10.toml"
    args = ["sweep", str(exp), "--strategies", "tune-default,leader-fusion", "--seeds", "1", "--sensitivity", "3",
            "--quiet"]
    assert main(args + ["--out", str(tmp_path / "ray"), "--address", ray_head]) == 0
    assert main(args + ["--out", str(tmp_path / "local"), "--jobs", "1"]) == 0
    for name in ("sensitivity.csv", "robustness.json"):  # the same perturbed worlds, the same results
        assert (tmp_path / "ray" / name).read_text() == (tmp_path / "local" / name).read_text()


def test_interrupted_validate_resumes(tmp_path, ray_address_file):
    """Ctrl-C keeps the journal and Tune's state; --resume continues from the trials' checkpoints."""
    import signal
    import time

    out = tmp_path / "rs"
    args = [sys.executable, "-m", "hetune.cli", "validate", str(SMOKE), "--strategy", "tune-default",
            "--out", str(out), "--quiet", "--set", "experiment.stop_iterations=30", *SMALL_BATCH]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = out / "events.partial.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if journal.is_file() and journal.read_text().count('"kind":"checkpoint"') >= 2:
            break
        time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "--resume" in err
    assert journal.is_file() and not (out / "summary.json").exists()
    before = [json.loads(line) for line in journal.read_text().splitlines()]
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(out), "--quiet", "--resume",
                 "--set", "experiment.stop_iterations=30", *SMALL_BATCH]) == 0
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2, 3}
    assert all(e in events for e in before if e["kind"] != "worker_removed")  # nothing journaled was lost
    cut = max(e["t"] for e in before)
    continued = 0
    for t in range(4):
        chunks = [e for e in events if e["kind"] == "chunk" and e["trial"] == t]
        # work after Tune's last saved state may be redone, never skipped: each chunk starts at or before
        # the furthest iteration reached so far (a chunk journaled just before Ctrl-C may be ahead of the
        # checkpoint the resumed trial restarts from); a trial ends at 30 iterations or at the target
        reached = 0
        for c in chunks:
            assert c["iteration"] - c["iterations"] <= reached, (t, c)
            reached = max(reached, c["iteration"])
        # (an iteration count may also go back where PBT clones a donor that is behind, as Ray's PBT does)
        stop = next(e for e in events if e["kind"] == "stop" and e["trial"] == t)
        assert chunks[-1]["iteration"] == stop["iteration"]
        assert stop["iteration"] == 30 or stop["reason"] == "target_accuracy"
        after = [e["iteration"] for e in events if e["kind"] == "chunk" and e["trial"] == t and e["t"] > cut]
        continued += bool(after) and after[0] > 10  # resumed from a checkpoint, not from scratch
    assert continued >= 1
    assert not journal.exists()


def test_validate_killed_with_sigkill_at_two_points_resumes(tmp_path, ray_address_file):
    """SIGKILL of the driver (no handler runs): --resume continues from Tune's saved state; no trial
    redoes more than one checkpoint interval, and the event log says what was redone."""
    import signal
    import time

    out = tmp_path / "killed"
    args = [sys.executable, "-m", "hetune.cli", "validate", str(SMOKE), "--strategy", "tune-default",
            "--out", str(out), "--quiet", "--set", "experiment.stop_iterations=30", *SMALL_BATCH]
    journal = out / "events.partial.jsonl"
    for point, (resume, checkpoints) in enumerate([([], 2), (["--resume"], 5)]):
        proc = subprocess.Popen(args + resume, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # its Ray processes share its session id
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            if journal.is_file() and journal.read_text().count('"kind":"checkpoint"') >= checkpoints:
                break
            time.sleep(0.5)
        assert proc.poll() is None, f"kill point {point}: the run ended before it"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kill_session(proc.pid)  # what the killed driver left running, by id
        assert journal.is_file() and not (out / "summary.json").exists()
    before = [json.loads(line) for line in journal.read_text().splitlines() if line.endswith("}")]
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(out), "--quiet", "--resume",
                 "--set", "experiment.stop_iterations=30", *SMALL_BATCH]) == 0
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1, 2, 3}
    assert all(e in events for e in before if e["kind"] != "worker_removed")  # nothing journaled was lost
    redone = [e for e in events if e["kind"] == "failure" and e["reason"].startswith("driver restarted")]
    assert all(0 < e["lost_iterations"] <= 10 for e in redone)  # at most one checkpoint interval (10)
    # the log says what was redone, and only that: where Tune restored a trial from an earlier save
    # than the journal had reached, the iterations between; nothing where it restored from that save
    journaled = {}
    for e in before:
        if e["kind"] == "chunk":
            journaled[e["trial"]] = e["iteration"]
        elif e["kind"] == "exploit":
            journaled[e["trial"]] = e["donor_iteration"]
    cut = max(e["t"] for e in before)  # the resumed run's clock goes on after the journal's last event
    after = [e for e in events if e["t"] > cut]
    for t, reached in journaled.items():
        first = next((e for e in after if e["trial"] == t and e["kind"] == "chunk"), None)
        if first is None:
            continue
        lost = [e["lost_iterations"] for e in after if e["trial"] == t and e in redone]
        assert lost == ([reached - (first["iteration"] - first["iterations"])]
                        if first["iteration"] - first["iterations"] < reached else []), (t, reached, first, lost)
    for t in range(4):
        reached = 0
        for c in (e for e in events if e["kind"] == "chunk" and e["trial"] == t):
            assert c["iteration"] - c["iterations"] <= reached, (t, c)  # redone, never skipped
            reached = max(reached, c["iteration"])
    # the view log was cut where each resumed strategy's saved state had seen it: its replay is exact
    assert _replays_exactly(out, "tune-default", ["experiment.stop_iterations=30", "experiment.batch_size=4"]) > 0


TINY = ["--quiet", "--set", "experiment.population=2", "--set", "experiment.stop_iterations=20",
        "--set", "experiment.checkpoint_interval=5", "--set", "pbt.perturbation_interval=10", *SMALL_BATCH]
SHORT = [*TINY, "--set", "experiment.stop_iterations=10"]  # where only that the run completes matters


def test_a_node_lost_in_a_real_run_and_in_its_simulation(tmp_path, capsys):
    """[faults] on the emulated cluster: the slow node is killed at 12 s and an identical one joins at
    20 s. The run goes on, the events record the loss, and the simulation of the same loss agrees on
    lost work within one checkpoint interval per failure; compare says what the loss accounts for."""
    out = tmp_path / "lost"
    trace = 'faults.trace=[{t_s = 12.0, node = "local-slow", down_s = 8.0}]'
    assert main(["validate", str(SMOKE), "--strategy", "tune-default", "--out", str(out), *TINY,
                 "--set", trace]) == 0
    assert capsys.readouterr().err.strip() == ""  # Ray's traceback of the dead actor went to the log file
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1}
    gone = [e["t"] for e in events if e["kind"] == "worker_removed" and e["node"] == "local-slow"]
    back = [e["t"] for e in events if e["kind"] == "worker_added" and e["node"] == "local-slow" and e["t"] > 0]
    assert gone and 12.0 <= gone[0] < 16.0 and back and 20.0 <= back[0] < 24.0
    assert not any(e["kind"] == "chunk" and e["node"] == "local-slow" and gone[0] < e["t"] - e["duration_s"]
                   and e["t"] < back[0] for e in events)  # nothing trained on the lost node while it was gone
    failures = [e for e in events if e["kind"] == "failure"]
    assert failures, "the trial on the lost node failed and restarted"
    assert main(["compare", str(out)]) == 0
    assert "faults: failures real" in capsys.readouterr().out
    f = json.loads((out / "fidelity.json").read_text())["faults"]
    interval = 5  # TINY's checkpoint interval
    for engine in ("real", "sim"):
        assert 0 <= f["lost_iterations"][engine] <= interval * max(1, f["failures"][engine])
    assert abs(f["lost_iterations"]["real"] - f["lost_iterations"]["sim"]) <= interval * max(
        f["failures"]["real"], f["failures"]["sim"], 1)
    assert f["sim_makespan_without_faults_s"] > 0


@pytest.mark.parametrize("token", [False, True])
def test_the_emulated_cluster_runs_with_or_without_a_ray_token(tmp_path, token):
    """Ray 2.60 turns token authentication on for new local clusters and keeps a token in
    ~/.ray/auth_token; with one left there, every trial's actor used to be cancelled before it ran."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token:
        (home / ".ray" / "auth_token").write_text("0123456789abcdef0123456789abcdef\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(home)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "hetune.cli", "validate", str(SMOKE), "--strategy", "tune-default",
                           "--out", str(out), *SHORT], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.strip() == ""  # --quiet: nothing from Ray either
    assert {e["trial"] for e in read_events(out / "events.jsonl") if e["kind"] == "stop"} == {0, 1}


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_runs_for_real_through_its_own_strategy_object(tmp_path, strategy):
    out = tmp_path / strategy
    assert main(["validate", str(SMOKE), "--strategy", strategy, "--out", str(out), *SHORT]) == 0
    events = read_events(out / "events.jsonl")
    assert {e["trial"] for e in events if e["kind"] == "stop"} == {0, 1}
    assert max(e["iteration"] for e in events if e["kind"] == "chunk") == 10
    carved = {e["worker"]: e["device"] for e in events if e["kind"] == "worker_added"}
    assert all(carved[e["worker"]] == e["device"] for e in events if e["kind"] == "chunk")  # on its slot's node
    # A chunk ends where the strategy says and the trainable saves right there: a paused trial goes
    # on from the iteration it paused at (an exploited one from its donor's), redoing nothing, and its
    # resume event says so (the iteration it starts from, as the simulator writes it).
    paused_at: dict[int, int | None] = {}
    for e in events:
        if e["kind"] == "pause":
            paused_at.setdefault(e["trial"], e["iteration"])
        elif e["kind"] in ("exploit", "failure"):
            paused_at[e["trial"]] = None
        elif e["kind"] == "resume":
            at = paused_at.pop(e["trial"], None)
            assert at is None or e["iteration"] == at, (e, at)
    # evaluation at every checkpoint interval (5) and the last iteration (10), nowhere else
    for e in events:
        if e["kind"] == "chunk":
            assert (e["eval_s"] > 0) == (e["iteration"] % 5 == 0 or e["iteration"] == 10), e
    assert len(list((out / "tune").rglob("checkpoint_*"))) <= 3 * 2  # only what PBT and resuming need
    # the strategy's answers are events too, in the simulator's schema: every chunk ran on a worker
    # the strategy gave its trial
    runs = {(e["trial"], e["worker"]) for e in events if e["kind"] == "decision" and e["action"] == "run"}
    assert {(e["trial"], e["worker"]) for e in events if e["kind"] == "chunk"} <= runs
    # and a fresh strategy object shown every view the run recorded answers as the run's did
    assert _replays_exactly(out, strategy, SHORT[2::2]) >= len(runs)


def test_a_strategy_added_in_a_test_runs_in_both_engines_unchanged(tmp_path):
    register(FastestOnly)
    try:
        inputs = load_inputs(SMOKE, SHORT[2::2])
        sim = simulate(inputs, inputs.make_strategy(FastestOnly.name), 0).events
        assert {e["device"] for e in sim if e["kind"] == "chunk"} == {"cpu-fast"}
        assert main(["validate", str(SMOKE), "--strategy", FastestOnly.name, "--out", str(tmp_path / "r"), *SHORT]) == 0
        real = read_events(tmp_path / "r" / "events.jsonl")
        assert {e["device"] for e in real if e["kind"] == "chunk"} == {"cpu-fast"}
        assert {e["trial"] for e in real if e["kind"] == "stop"} == {0, 1}
    finally:
        strategy_registry.REGISTRY.pop(FastestOnly.name, None)
