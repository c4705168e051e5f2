"""Ray Tune's own PopulationBasedTraining, driven by a stand-in for Tune's controller on a simulated clock.

The parity benchmark (bench/bench_pbt_parity.py) needs thousands of PBT runs of Ray's real code: Ray
Tune for real takes minutes per run on this host. ``PopulationBasedTraining`` itself is plain Python:
its decisions (``on_trial_result``, ``_quantiles``, ``_checkpoint_or_exploit``, ``_explore``,
``choose_trial_to_run``) only read a few trial attributes and call three controller methods
(``get_trials``, ``get_live_trials``, ``_schedule_trial_save``, ``pause_trial``). This module gives
them trials and a controller that behave as Tune 2.60's ``TuneController`` does for hetune's
trainables, on a simulated clock:

- a trial reports one result per iteration (``training_iteration``, ``time_total_s``, ``accuracy``:
  the last evaluation, refreshed every ``checkpoint_interval`` iterations and at the last one);
- the stopper sees a result before the scheduler (stop at ``stop_iterations``, or at the target
  accuracy outside budget mode), as ``TuneController._process_trial_result`` does;
- ``PAUSE`` saves, ends the actor and frees its slot; a trial PBT paused for an exploit frees its slot
  and restarts later from the donor checkpoint PBT put in its checkpoint manager;
- a free slot goes to ``choose_trial_to_run``'s pick, then to never-started trials in order; a trial
  whose actor is starting is ``PENDING`` (other trials reaching a perturbation point then pause, as
  in Tune), ``RUNNING`` from when its actor is up;
- time per result, save, start and restore are the simulator's inputs for the same cluster
  (``sim.engine.Simulation``'s workers), so the two engines differ only in how they run PBT.

The learning is the experiment's learning model; a trial's model state is advanced lazily (only
where it is read: an evaluation or a save), which is exact because ``advance`` over k iterations at
one configuration equals k single iterations. Ray's PBT draws from Python's ``random`` and NumPy's
global stream; ``run_standin`` seeds both from the run's seed.
"""

from __future__ import annotations

import heapq
import logging
import random
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
from ray.tune.experiment import Trial as TuneTrial
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

from hetune.sim import strategies
from hetune.sim.engine import Simulation
from hetune.sim.learning import advance
from hetune.sim.loader import RunInputs
from hetune.sim.state import Worker


@dataclass
class StandInCheckpoint:
    """What a save holds: the model state at ``iteration`` and what the trainable saves with it."""

    state: Any
    iteration: int
    time_total_s: float
    accuracy: float
    node: str


class StandInTrial:
    """The attributes of a Tune ``Trial`` that PopulationBasedTraining reads and writes."""

    def __init__(self, index: int, config: dict[str, float], rng: np.random.Generator) -> None:
        self.index = index
        self.trial_id = f"{index:05d}"
        self.experiment_tag = str(index)
        self.status = TuneTrial.PENDING
        self.config = dict(config)
        self.evaluated_params: dict[str, Any] = {}
        self.last_result: dict[str, Any] = {}
        self.temporary_state = SimpleNamespace(saving_to=None)
        self.run_metadata = SimpleNamespace(checkpoint_manager=SimpleNamespace(
            checkpoint_config=SimpleNamespace(num_to_keep=None), _latest_checkpoint_result=None))
        self.rng = rng
        # the actor's state (what a restore sets): model state, iteration, time_total_s, accuracy
        self.state: Any = None
        self.pending = 0  # iterations trained since ``state`` was last advanced (lazy)
        self.n = 0
        self.time_total_s = 0.0
        self.accuracy = 0.0
        self.started = False
        self.save_asked = False  # PBT asked for a save at the result being processed
        self.restore_s = 0.0  # seconds its next restore takes (copy and load), once its actor is up
        self.slot: Worker | None = None
        self.version = 0  # bumped when the trial leaves its slot: its scheduled result is void

    def is_finished(self) -> bool:
        return self.status in (TuneTrial.TERMINATED, TuneTrial.ERROR)

    @property
    def checkpoint(self) -> StandInCheckpoint | None:
        latest = self.run_metadata.checkpoint_manager._latest_checkpoint_result
        return None if latest is None else latest.checkpoint

    def set_experiment_tag(self, tag: str) -> None:
        self.experiment_tag = tag

    def set_config(self, config: dict[str, Any]) -> None:
        self.config = dict(config)

    def __repr__(self) -> str:
        return f"StandInTrial({self.index}, {self.status})"


@dataclass
class StandInRun:
    """What one stand-in run produced.

    Args:
        readings: (time s, trial, training_iteration, accuracy) of every evaluation, in time order.
        exploits: exploits PBT made (Ray's ``_num_perturbations``).
        final: each trial's last reading, by trial index.
        makespan_s: when the last trial stopped, seconds.
        pauses: results answered with PAUSE.
    """

    readings: list[tuple[float, int, int, float]] = field(default_factory=list)
    exploits: int = 0
    final: dict[int, float] = field(default_factory=dict)
    makespan_s: float = 0.0
    pauses: int = 0


class StandInController:
    """The parts of Tune's controller that PBT calls, and the loop that runs the trials.

    Args:
        inputs: the experiment (the workers of its Ray-native strategy, plain Ray Tune PBT, are the slots).
        seed: the run's seed (the same initial configurations and trial streams as the simulator's run).
        pbt: a fresh PopulationBasedTraining built from the experiment (validate's arguments).
    """

    search_alg = None

    def __init__(self, inputs: RunInputs, seed: int, pbt: PopulationBasedTraining) -> None:
        sim = Simulation(inputs, inputs.make_strategy(strategies.ray_native()), seed)
        self.sim = sim
        self.model = cast(Any, sim.model).model  # the learning model (SurrogatePopulation.model)
        self.info = inputs.experiment.experiment
        self.budget_mode = self.info.budget_mode
        self.pbt = pbt
        self.trials = [StandInTrial(t.id, t.config, t.rng) for t in sim.trials]
        for st, t in zip(self.trials, sim.trials):  # the simulator's initial state (its luck) for this seed
            st.state = t.progress
        self.free: list[Worker] = list(sim.workers)  # ordered by id
        self.staged: set[int] = set()
        self.now = 0.0
        self._queue: list[tuple[float, int, str, int, int]] = []
        self._seq = 0
        self.out = StandInRun()
        for st in self.trials:
            pbt.on_trial_add(self._as_tune, cast(Any, st))

    @property
    def _as_tune(self) -> Any:
        """This controller where Ray's type hints say TuneController: PBT calls only what it defines."""
        return self

    # --------------------------------------------------------- what PBT calls
    def get_trials(self) -> list[StandInTrial]:
        return self.trials

    def get_live_trials(self) -> list[StandInTrial]:
        return [t for t in self.trials if not t.is_finished()]

    def _schedule_trial_save(self, trial: StandInTrial, result: dict[str, Any] | None = None) -> StandInCheckpoint:
        trial.save_asked = True
        return self._snapshot(trial)

    def pause_trial(self, trial: StandInTrial, should_checkpoint: bool = True) -> None:
        if should_checkpoint:
            self._keep(trial, self._snapshot(trial))
        trial.status = TuneTrial.PAUSED

    # --------------------------------------------------------- the trainable
    def _materialize(self, t: StandInTrial) -> None:
        if t.pending:
            t.state = advance(self.model, t.state, t.config, t.pending, t.rng)
            t.pending = 0

    def _snapshot(self, t: StandInTrial) -> StandInCheckpoint:
        self._materialize(t)
        return StandInCheckpoint(t.state, t.n, t.time_total_s, t.accuracy, t.slot.node if t.slot else "")

    @staticmethod
    def _keep(t: StandInTrial, ck: StandInCheckpoint) -> None:
        t.run_metadata.checkpoint_manager._latest_checkpoint_result = SimpleNamespace(checkpoint=ck, metrics={})

    def _evaluates(self, n: int) -> bool:
        return n % self.info.checkpoint_interval == 0 or n >= self.info.stop_iterations

    def _step_s(self, t: StandInTrial) -> float:
        w = t.slot
        assert w is not None
        return w.step_time_s + (self.sim.eval_s(w.model, w) if self._evaluates(t.n + 1) else 0.0)

    # --------------------------------------------------------- the loop
    def _push(self, at: float, kind: str, index: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, index, version))

    def _fill(self) -> None:
        """Tune's ``_maybe_add_actors``: the scheduler's pick first, then never-started trials in order."""
        while self.free:
            t = cast(StandInTrial | None, self.pbt.choose_trial_to_run(self._as_tune))
            if t is None or t.index in self.staged:
                break
            self._stage(t)
        for t in self.trials:
            if not self.free:
                return
            if t.status == TuneTrial.PENDING and not t.started and t.index not in self.staged:
                self._stage(t)

    def _stage(self, t: StandInTrial) -> None:
        w = self.free.pop(0)
        t.status = TuneTrial.PENDING  # its actor is starting
        t.slot = w
        self.staged.add(t.index)
        dm = w.model
        if not t.started:
            self._push(self.now + dm.start_overhead_s, "up", t.index, t.version)
            return
        ck = t.checkpoint
        assert ck is not None, f"trial {t.index} restarts without a checkpoint"
        copy_s = self.sim._copy_s(dm, ck.node, w.node)
        # the actor starts (PENDING), then restores (RUNNING) and trains its first iteration
        self._push(self.now + dm.restart_s, "up", t.index, t.version)
        t.restore_s = copy_s + dm.load_s

    def _up(self, t: StandInTrial) -> None:
        self.staged.discard(t.index)
        t.status = TuneTrial.RUNNING
        delay = 0.0
        if t.started:
            ck = t.checkpoint
            assert ck is not None
            t.state, t.pending, t.n = ck.state, 0, ck.iteration
            t.time_total_s, t.accuracy = ck.time_total_s, ck.accuracy
            delay = t.restore_s
        t.started = True
        self._push(self.now + delay + self._step_s(t), "result", t.index, t.version)

    def _leave(self, t: StandInTrial, after_s: float) -> None:
        """``t`` gives its slot back ``after_s`` seconds from now (after a save), or at once."""
        w = t.slot
        assert w is not None
        t.slot = None
        t.version += 1
        if after_s > 0:
            self._push(self.now + after_s, "free", w.id, -1)
        else:
            self._release(w)

    def _release(self, w: Worker) -> None:
        self.free.append(w)
        self.free.sort(key=lambda x: x.id)

    def _result(self, t: StandInTrial) -> None:
        w = t.slot
        assert w is not None
        t.time_total_s += self._step_s(t)
        t.n += 1
        t.pending += 1
        if self._evaluates(t.n):
            self._materialize(t)
            t.accuracy = float(self.model.observe(t.state, t.rng))
            self.out.readings.append((self.now, t.index, t.n, t.accuracy))
        result = {"training_iteration": t.n, "time_total_s": t.time_total_s, "accuracy": t.accuracy, "step": t.n}
        reached = t.accuracy >= self.info.target_accuracy and not self.budget_mode
        if t.n >= self.info.stop_iterations or reached:  # the stopper sees the result before the scheduler
            t.status = TuneTrial.TERMINATED
            self.out.final[t.index] = t.accuracy
            self.out.makespan_s = max(self.out.makespan_s, self.now)
            self._leave(t, 0.0)
            return
        t.save_asked = False
        decision = self.pbt.on_trial_result(self._as_tune, cast(Any, t), result)
        t.last_result = result
        self.out.exploits = self.pbt._num_perturbations
        saves = t.save_asked or t.n % self.info.checkpoint_interval == 0
        save_s = w.model.save_s if saves or decision == TrialScheduler.PAUSE else 0.0
        if decision == TrialScheduler.PAUSE:
            self.out.pauses += 1
            self.pause_trial(t, should_checkpoint=True)
            self._leave(t, save_s)
        elif t.status == TuneTrial.PAUSED:  # paused by PBT's exploit (no save): restarts from the donor's checkpoint
            self._leave(t, 0.0)
        else:
            self._push(self.now + save_s + self._step_s(t), "result", t.index, t.version)

    def run(self) -> StandInRun:
        """Run every trial to its stop; return what happened.

        Everything that happens at one instant is processed before free slots are filled (Tune's
        controller loop handles the events it has, then adds actors), so a slot freed by a trial's
        exploit at the moment it restarts is one the restarting trial can take.
        """
        self._fill()
        slots = {w.id: w for w in self.sim.workers}
        while self._queue:
            now = self._queue[0][0]
            self.now = now
            while self._queue and self._queue[0][0] == now:
                _, _, kind, index, version = heapq.heappop(self._queue)
                if kind == "free":
                    self._release(slots[index])
                    continue
                t = self.trials[index]
                if version == t.version:
                    (self._up if kind == "up" else self._result)(t)
            self._fill()
        unfinished = [t.index for t in self.trials if not t.is_finished()]
        if unfinished:
            raise RuntimeError(f"stand-in run stalled with trials {unfinished} unfinished")
        return self.out


def run_standin(inputs: RunInputs, seed: int) -> StandInRun:
    """One PBT run of Ray's PopulationBasedTraining under the stand-in controller.

    Args:
        inputs: the experiment (its PBT settings build the scheduler, as ``hetune validate`` does).
        seed: the run's seed: the simulator's initial configurations and trial streams for this seed,
            and the seed of Python's and NumPy's global streams that Ray's PBT draws from.
    """
    from hetune.real.tune_args import pbt_kwargs

    logging.getLogger("ray.tune.schedulers.pbt").setLevel(logging.WARNING)  # one INFO line per exploit
    random.seed(seed)
    np.random.seed(seed % 2**32)
    kwargs = pbt_kwargs(inputs.experiment)
    pbt = PopulationBasedTraining(log_config=False, **kwargs)
    return StandInController(inputs, seed, pbt).run()
