"""StrategyScheduler: the simulator's strategy objects placing Ray Tune trials (logic, without a cluster)."""

from __future__ import annotations

import pytest
# ray[tune] is a base dependency: a broken install fails here, it is not skipped
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from conftest import FastestOnly  # (chunks of PBT's interval: 5 in every test here)
from hetune.real.strategy_scheduler import StrategyScheduler, StrategyStalled, node_resources
from hetune.sim.cluster import WorkerSpec
from hetune.sim.strategies.base import IDLE, RETIRE, Ordering, Run, Strategy


class FakeTrial:
    def __init__(self, index: int) -> None:
        self.trial_id = f"abc_{index:05d}"
        self.status = Trial.PENDING
        self.last_result: dict = {}
        self.resources: dict | None = None

    def set_status(self, status: str) -> None:
        self.status = status

    def update_resources(self, resources: dict) -> None:
        assert self.status != Trial.RUNNING
        self.resources = resources


class FakeController:
    def __init__(self, trials: list[FakeTrial]) -> None:
        self.trials = trials

    def get_trials(self) -> list[FakeTrial]:
        return self.trials

    def _set_trial_status(self, trial: FakeTrial, status: str) -> None:
        trial.status = status


class PassivePBT:
    """Stands in for PopulationBasedTraining: never exploits."""

    def on_trial_add(self, *a) -> None: ...
    def on_trial_result(self, *a) -> str: return TrialScheduler.CONTINUE
    def on_trial_complete(self, *a) -> None: ...
    def on_trial_remove(self, *a) -> None: ...
    def on_trial_error(self, *a) -> None: ...


WORKERS = [WorkerSpec("slow-node", "slow", 1), WorkerSpec("fast-node", "fast", 2)]
STEP = {"slow": 3.0, "fast": 1.0}


def make(strategy: Strategy, n: int = 2):
    trials = [FakeTrial(i) for i in range(n)]
    sched = StrategyScheduler(strategy, WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"}, PassivePBT(),
                              interval=5, mode="max", stop_iterations=10)
    ctl = FakeController(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    return sched, ctl, trials


def report(sched, ctl, trial, iteration, accuracy=0.5):
    trial.last_result = {"training_iteration": iteration, "accuracy": accuracy, "step_s": 1.0, "eval_s": 0.0}
    return sched.on_trial_result(ctl, trial, trial.last_result)


def test_trials_are_held_until_the_strategy_places_them_on_its_worker():
    strategy = FastestOnly()
    sched, ctl, trials = make(strategy)
    assert all(t.status == Trial.PAUSED for t in trials)  # Tune would start PENDING trials on its own
    chosen = sched.choose_trial_to_run(ctl)
    assert chosen is trials[0] and chosen.resources == {"CPU": 2.0, "hetune-worker:1": 1.0}
    assert sched.slots[0].retired and not sched.slots[1].idle
    chosen.status = Trial.RUNNING
    assert sched.choose_trial_to_run(ctl) is None  # the one worker left is busy
    assert [report(sched, ctl, chosen, i) for i in range(1, 5)] == [TrialScheduler.CONTINUE] * 4
    # chunk end: the strategy picks the least-progressed trial, the other one: pause this, reserve that
    assert report(sched, ctl, chosen, 5) == TrialScheduler.PAUSE
    assert strategy.chunks == [(1, 0, 5)]
    chosen.status = Trial.PAUSED
    nxt = sched.choose_trial_to_run(ctl)
    assert nxt is trials[1] and nxt.resources == {"CPU": 2.0, "hetune-worker:1": 1.0}


def test_the_worker_keeps_its_trial_when_the_strategy_chooses_it_again():
    class Sticky(FastestOnly):
        def assign(self, worker, view):
            return RETIRE if worker.step_time_s > view.fastest_step_time_s() else (
                IDLE if view.peek(Ordering.FIFO) is None else Run(view.peek(Ordering.FIFO).id, 5))

    sched, ctl, trials = make(Sticky(), n=1)
    t = sched.choose_trial_to_run(ctl)
    t.status = Trial.RUNNING
    for i in range(1, 10):
        assert report(sched, ctl, t, i) == TrialScheduler.CONTINUE  # no pause and restart at iteration 5


def test_a_restart_pauses_the_trial_and_places_it_again_on_its_worker():
    """Run(restart=True) of the worker's own trial: Tune pauses it (its actor stops) and starts it again."""
    class Restarting(FastestOnly):
        def assign(self, worker, view):
            if worker.step_time_s > view.fastest_step_time_s():
                return RETIRE
            t = view.peek(Ordering.FIFO)
            return IDLE if t is None else Run(t.id, 5, restart=worker.resident is not None)

    sched, ctl, trials = make(Restarting(), n=1)
    t = sched.choose_trial_to_run(ctl)
    t.status = Trial.RUNNING
    assert [report(sched, ctl, t, i) for i in range(1, 5)] == [TrialScheduler.CONTINUE] * 4
    assert report(sched, ctl, t, 5) == TrialScheduler.PAUSE
    t.status = Trial.PAUSED
    assert sched.choose_trial_to_run(ctl) is t and t.resources == {"CPU": 2.0, "hetune-worker:1": 1.0}


def test_a_stalled_strategy_is_detected(monkeypatch):
    import hetune.real.strategy_scheduler as mod

    class Lazy(Strategy):
        name = "lazy"

        def assign(self, worker, view):
            return IDLE

    sched, ctl, _ = make(Lazy())
    monkeypatch.setattr(mod, "STALL_S", 0.0)
    assert sched.choose_trial_to_run(ctl) is None  # the clock starts
    with pytest.raises(StrategyStalled, match="left every worker idle with 2 trial"):
        sched.choose_trial_to_run(ctl)


def test_each_node_declares_the_slots_of_its_workers():
    assert node_resources(WORKERS + [WorkerSpec("fast-node", "fast", 2)]) == {
        "slow-node": {"hetune-worker:0": 1.0}, "fast-node": {"hetune-worker:1": 1.0, "hetune-worker:2": 1.0}}


def test_a_trial_that_failed_for_good_frees_its_worker():
    sched, ctl, trials = make(FastestOnly())
    first = sched.choose_trial_to_run(ctl)
    first.status = Trial.ERROR  # no retries left: Tune stops it
    nxt = sched.choose_trial_to_run(ctl)
    assert nxt is trials[1] and sched.trials[0].status == "stopped"


def test_the_strategy_state_survives_a_restart_of_the_driver(tmp_path):
    """Tune.restore does not save schedulers: the strategy is pickled beside the run and restored."""
    strategy = FastestOnly()
    trials = [FakeTrial(i) for i in range(2)]
    sched = StrategyScheduler(strategy, WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"}, PassivePBT(),
                              interval=5, mode="max", stop_iterations=10, state_path=tmp_path / "state.pkl")
    ctl = FakeController(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    chosen = sched.choose_trial_to_run(ctl)
    chosen.status = Trial.RUNNING
    for i in range(1, 6):
        report(sched, ctl, chosen, i)
    assert strategy.chunks == [(1, 0, 5)]
    # a new driver: a fresh strategy object, then the state of the one before it
    again = StrategyScheduler(FastestOnly(), WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"},
                              PassivePBT(), interval=5, mode="max", stop_iterations=10,
                              state_path=tmp_path / "state.pkl")
    assert again.strategy.chunks == [] and again.restore_strategy()
    assert again.strategy.chunks == [(1, 0, 5)]


class StatefulPBT(PassivePBT):
    """Keeps PopulationBasedTraining's per-trial state fields (never exploits)."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self._new = lambda: SimpleNamespace(last_perturbation_time=0, last_train_time=0, last_score=None,
                                            last_checkpoint=None, last_result=None)
        self._trial_state: dict = {}

    def on_trial_add(self, ctl, trial) -> None:
        self._trial_state[trial] = self._new()


def test_pbt_state_survives_a_restart_of_the_driver(tmp_path):
    """Without it a resumed run perturbs every trial at its first result (seen: an exploit at 21 from a
    donor still at 10, one iteration after the restart)."""
    trials = [FakeTrial(i) for i in range(2)]
    pbt = StatefulPBT()
    sched = StrategyScheduler(FastestOnly(), WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"}, pbt,
                              interval=5, mode="max", stop_iterations=10, state_path=tmp_path / "state.pkl")
    ctl = FakeController(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    pbt._trial_state[trials[1]].last_perturbation_time = 5
    pbt._trial_state[trials[1]].last_score = 0.4
    chosen = sched.choose_trial_to_run(ctl)  # asks the strategy, which persists
    assert chosen is not None and (tmp_path / "state.pkl").is_file()
    again_pbt = StatefulPBT()
    again = StrategyScheduler(FastestOnly(), WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"},
                              again_pbt, interval=5, mode="max", stop_iterations=10, state_path=tmp_path / "state.pkl")
    assert again.restore_strategy()
    fresh = [FakeTrial(i) for i in range(2)]  # Tune.restore builds new Trial objects
    for t in fresh:
        again.on_trial_add(FakeController(fresh), t)
    assert again_pbt._trial_state[fresh[1]].last_perturbation_time == 5
    assert again_pbt._trial_state[fresh[1]].last_score == 0.4
    assert again_pbt._trial_state[fresh[0]].last_perturbation_time == 0


def test_a_resumed_donor_checkpoint_comes_back_with_its_result(tmp_path):
    """PBT restores an exploiter with (donor checkpoint, donor last result); a checkpoint restored
    without the result made Tune's restore fail ('NoneType' has no attribute 'get', CI run of a
    SIGKILLed validate). The result is persisted with it, and a checkpoint without one is not offered."""
    from ray.tune import Checkpoint

    (tmp_path / "ckpt").mkdir()
    trials = [FakeTrial(i) for i in range(2)]
    pbt = StatefulPBT()
    def make(p):
        return StrategyScheduler(FastestOnly(), WORKERS, lambda d, k: STEP[d], {"slow": "cpu", "fast": "cpu"},
                                 p, interval=5, mode="max", stop_iterations=10, state_path=tmp_path / "s.pkl")
    sched = make(pbt)
    ctl = FakeController(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    for t in trials:
        pbt._trial_state[t].last_checkpoint = Checkpoint.from_directory(str(tmp_path / "ckpt"))
        pbt._trial_state[t].last_score = 0.4
    pbt._trial_state[trials[1]].last_result = {"training_iteration": 5, "accuracy": 0.4}
    assert sched.choose_trial_to_run(ctl) is not None
    again_pbt = StatefulPBT()
    again = make(again_pbt)
    assert again.restore_strategy()
    fresh = [FakeTrial(i) for i in range(2)]
    for t in fresh:
        again.on_trial_add(FakeController(fresh), t)
    donor = again_pbt._trial_state[fresh[1]]
    assert donor.last_result == {"training_iteration": 5, "accuracy": 0.4}
    assert str(donor.last_checkpoint.path) == str(tmp_path / "ckpt")
    assert again_pbt._trial_state[fresh[0]].last_checkpoint is None  # saved without a result


def test_every_registered_strategy_pickles_mid_run():
    from conftest import REPO
    import pickle

    from hetune.sim.engine import simulate
    from hetune.sim.loader import load_inputs
    from hetune.sim.strategies import names

    inputs = load_inputs(REPO / "configs/experiments/pbt-resnet18-cifar10.toml")
    for name in names():
        strategy = inputs.make_strategy(name)
        simulate(inputs, strategy, 0)
        copy = pickle.loads(pickle.dumps(strategy))
        assert type(copy) is type(strategy) and vars(copy).keys() == vars(strategy).keys()


def test_a_trial_on_a_lost_node_is_placed_again_by_the_strategy():
    """The node under a slot dies: Tune requeues the trial; the scheduler marks the slot down, holds the
    trial for the strategy, and takes the slot back when a node declares it again."""
    sched, ctl, trials = make(FastestOnly())
    live = {"hetune-worker:0", "hetune-worker:1"}
    changes = []
    sched.liveness.live_resources = lambda: set(live)
    sched.liveness.on_change = lambda slot, kind: changes.append((slot.id, kind))
    chosen = sched.choose_trial_to_run(ctl)
    chosen.status = Trial.RUNNING
    report(sched, ctl, chosen, 1)
    live.discard("hetune-worker:1")  # the fast node is gone; Tune sees the actor die and requeues the trial
    sched.on_trial_error(ctl, chosen)
    chosen.status = Trial.PENDING
    sched.on_trial_add(ctl, chosen)
    assert sched.slots[1].down and chosen.status == Trial.PAUSED and sched.trials[0].status == "paused"
    assert changes == [(1, "worker_removed")]
    assert sched.choose_trial_to_run(ctl) is None  # its only worker is down; the slow one was retired
    live.add("hetune-worker:1")  # a replacement node declares the slot
    sched.liveness._checked = -1e9
    again = sched.choose_trial_to_run(ctl)
    assert again is not None and again.resources == {"CPU": 2.0, "hetune-worker:1": 1.0}
    assert changes == [(1, "worker_removed"), (1, "worker_added")] and not sched.slots[1].down


def test_a_trial_restarting_on_a_node_that_dies_after_its_actor_is_freed():
    """Ray can report the actor's death before the node's: the trial is requeued onto its own slot,
    and the scheduler frees it once the node is seen dead."""
    sched, ctl, trials = make(FastestOnly())
    live = {"hetune-worker:0", "hetune-worker:1"}
    sched.liveness.live_resources = lambda: set(live)
    chosen = sched.choose_trial_to_run(ctl)
    chosen.status = Trial.RUNNING
    report(sched, ctl, chosen, 1)
    sched.on_trial_error(ctl, chosen)
    chosen.status = Trial.PENDING
    sched.on_trial_add(ctl, chosen)  # the node still looks alive: it restarts on its own slot
    assert chosen.status == Trial.PENDING and sched.slots[1].trial is chosen
    live.discard("hetune-worker:1")
    sched.liveness._checked = -1e9
    ctl._trial_to_actor, ctl._actor_to_trial = {chosen: "actor"}, {"actor": chosen}  # Tune's pending request
    ctl._staged_trials, removed = {chosen}, []
    ctl._remove_actor = lambda tracked_actor: removed.append(tracked_actor)
    ctl._unstage_trial_with_resources = ctl._staged_trials.discard
    assert sched.choose_trial_to_run(ctl) is None
    assert sched.slots[1].down and chosen.status == Trial.PAUSED and sched.trials[0].status == "paused"
    # the request is gone: a node declaring the slot again does not start the trial behind the strategy
    assert removed == ["actor"] and not ctl._trial_to_actor and not ctl._actor_to_trial and not ctl._staged_trials


def test_a_trial_tune_runs_outside_the_slots_waits_paused_once_exploited():
    """A trial with no slot (Tune restarted it on its own) that PBT exploits is paused: the scheduler
    must not ask Tune to train it (Tune would look for the actor it just stopped)."""
    sched, ctl, trials = make(FastestOnly())

    class Exploits(PassivePBT):
        def on_trial_result(self, controller, trial, result) -> str:
            trial.status = Trial.PAUSED
            return TrialScheduler.NOOP
    sched.pbt = Exploits()
    trials[1].status = Trial.RUNNING
    assert sched._slot_of(trials[1]) is None
    assert report(sched, ctl, trials[1], 3) == TrialScheduler.NOOP
    trials[0].status = Trial.RUNNING
    sched.pbt = PassivePBT()
    assert report(sched, ctl, trials[0], 3) == TrialScheduler.CONTINUE
