"""The SimPy engine: workers run chunks of PBT trials as the strategy decides.

Timing charged per chunk (seconds, from the calibration of the worker's device type):

- first start of a trial: ``start_overhead_s``;
- resume on a worker that does not hold the trial in memory:
  ``resume_s (or start_overhead_s where not measured) + copy_s + load_s``, where
  ``copy_s = checkpoint_mb * 8 / 1000 / network_gbps`` when the checkpoint lies on another node, else 0
  (with a calibrated ``[storage]``, sim/storage.py: the download from storage, on every restore);
- compute: ``iterations * step_time_s``, plus one evaluation (``eval_s`` scaled to the worker's
  devices or cores like a step's compute, times ``eval_samples / 10,000``) when the chunk ends
  where the real trainable evaluates (a multiple of ``checkpoint_interval``, or the last iteration);
  both times the chunk's and the run's random factors where the calibration measured spreads, and
  every overhead times its own (sim/timing_noise.py); a replay may take a run's own (recorded_seconds.py);
- checkpoint save at the end of every chunk: ``save_s`` and the upload to a calibrated storage
  (chunks end at checkpoint boundaries, or earlier when a strategy asks for fewer iterations, and a
  trial may change worker after any chunk, so its state is always saved);
- exploit: the trial stops and restarts from the donor's checkpoint, so its next resume pays
  ``start_overhead_s + copy_s + load_s`` (Ray Tune restarts an exploited trial: reuse_actors is off).

PBT follows Ray Tune's PopulationBasedTraining (sim/exploit.py).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import simpy

from hetune.sim.cluster import WorkerSpec
from hetune.sim.enums import TrialStatus
from hetune.sim.events import make_event
from hetune.sim.hooks import MoveHook, move_effects
from hetune.sim.idle import DispatchPass, IdleWorkers, verify_idle
from hetune.sim.errors import EventLimitReached
from hetune.sim.learning import LearningModelFailed
from hetune.sim.loader import RunInputs
from hetune.sim.exploit import ExploitSteps
from hetune.sim.faults import FaultSteps
from hetune.sim.population import Clone, PopulationModel, SurrogatePopulation
from hetune.sim.recorded_seconds import RecordedSeconds
from hetune.sim.ranking import Ranking
from hetune.sim.runnable import RunnableIndex
from hetune.sim.state import Checkpoint, SimResult, SimulationError, Trial, Worker
from hetune.sim.strategies.base import IDLE, Decision, Idle, Retire, Run, Strategy
from hetune.sim.view import EngineView, StartingSet
from hetune.sim.view_log import DIRECT, ViewLog
from hetune.sim.timing_noise import TimingNoise
from hetune.sim.throughput import DeviceModel


class Simulation(ExploitSteps, FaultSteps):
    """One simulated PBT run of an experiment under one strategy.

    Args:
        inputs: experiment, cluster and calibration.
        strategy: a fresh strategy instance (it holds per-run state).
        seed: seed of every random stream of the run.
        population: accuracy and PBT decisions (default: the learning curves; a ReplayPopulation: a run's).
        hooks: consulted each time a trial moves to a worker of another speed.
        view_log: writes down every view the strategy is asked with, and its answers.
        seconds: a recorded run's own seconds in place of the calibration's (sim/recorded_seconds.py).

    Node failures (the experiment's ``[faults]``, sim/faults.py) are replayed in surrogate runs;
    a replay of a recorded run keeps the recorded run's own failures instead.
    """

    hints = "use"  # the strategy's idle groups: "use", "verify" (tests) or "off" (ask every idle worker)
    max_events = 1 << 62  # the events a run may log before it stops with EventLimitReached

    def __init__(self, inputs: RunInputs, strategy: Strategy, seed: int, population: PopulationModel | None = None,
                 hooks: Sequence[MoveHook] = (), view_log: ViewLog | None = None,
                 seconds: RecordedSeconds | None = None) -> None:
        exp = inputs.experiment
        self.asker = view_log or DIRECT  # every question to the strategy goes through it (sim/view_log.py)
        self.inputs = inputs
        self.info = exp.experiment
        self.pbt = exp.pbt
        self.model: PopulationModel = population or SurrogatePopulation(inputs.make_learning_model().for_run(seed),
                                                                        self.pbt)
        self.hooks = list(hooks)
        self.population = self.model.population(self.info.population)
        self.stop_iterations = self.info.stop_iterations
        self.strategy = strategy
        self.env = simpy.Environment()
        self.events: list[dict[str, Any]] = []
        self.seed = seed
        # One SeedSequence: a child per trial (initial config + evaluation noise) and one for
        # PBT decisions, so every strategy sees the same population for the same seed.
        root = np.random.SeedSequence(seed)
        trial_seqs = root.spawn(self.population)
        self.pbt_rng = np.random.default_rng(root.spawn(1)[0])
        self.noise = TimingNoise(root, self.info.batch_size).under(seconds)  # own streams, after the others
        self.trials: list[Trial] = []
        for i, ss in enumerate(trial_seqs):
            rng = np.random.default_rng(ss)
            self.trials.append(Trial(i, self.model.initial_config(i, rng), rng))
        self.runnable = RunnableIndex(self.pbt.mode)
        for t in self.trials:  # after every config is drawn: each trial's stream draws its config first
            t.progress = self.model.initial_state(t)
            self.runnable.add(t)
        self.ranking = Ranking(self.pbt.mode)
        self.workers = self._make_workers()
        if not self.workers:
            raise SimulationError(f"strategy {strategy.name!r} carved no workers from cluster "
                                  f"{inputs.cluster.cluster.name!r}")
        self.fastest_step = min(w.step_time_s for w in self.workers)
        self.copy_bandwidth_mb_s = inputs.cluster.cluster.network_gbps * 1000.0 / 8.0
        self.storage = inputs.calibration.storage
        self.view = EngineView(self)
        self.remaining = self.population * self.stop_iterations
        self.unfinished = self.population
        self.time_to_target: float | None = None
        hinted = type(strategy).idle_group is not Strategy.idle_group
        self._idle = IdleWorkers((lambda w: strategy.idle_group(w, self.view)) if hinted else None)
        for w in self.workers:
            self._idle.add(w)
        self._barrier: set[int] = set()
        self._awaiting: dict[int, list[tuple[Trial, Clone]]] = {}
        self._procs: dict[int, Any] = {}  # worker id -> its busy process (interrupted when its node fails)
        self._running: dict[int, int] = {}  # worker id -> the trial its process runs
        self._done = self.env.event()  # the last trial stopped (ends a run whose nodes still fail)
        self.starting = StartingSet(self.trials)  # trials whose process is starting on a worker (Tune: PENDING)
        self.faults = exp.faults if population is None else None

    # ----------------------------------------------------------------- set-up
    def _make_workers(self) -> list[Worker]:
        cluster = self.inputs.cluster
        where = self.inputs.experiment.calibration.path
        step_time_s = self.inputs.calibration.step_time_fn(self.info.model, self.info.batch_size, cluster, where)
        specs: list[WorkerSpec] = self.strategy.workers(cluster, step_time_s)
        out = []
        for i, s in enumerate(specs):
            dm = self.inputs.calibration.device_model(self.info.model, s.device, where)
            out.append(Worker(i, s.node, s.device, s.devices, cluster.device_kind(s.device), dm,
                              step_time_s(s.device, s.devices)))
        return out

    def _emit(self, kind: str, trial: Trial | None = None, worker: Worker | None = None, **extra: Any) -> None:
        if len(self.events) >= self.max_events:  # checked as the run goes: an estimate can be wrong
            raise EventLimitReached(f"the simulation passed --max-events {self.max_events:,} at t={self.env.now:.0f}s "
                                    f"(strategy {self.strategy.name!r}, seed {self.seed}); raise it to run on")
        t, w = (None, None, None) if trial is None else (trial.id, trial.iteration, trial.accuracy), worker
        self.events.append(make_event(self.env.now, kind, trial=t[0], iteration=t[1], accuracy=t[2],
                                      worker=None if w is None else w.id, node=None if w is None else w.node,
                                      device=None if w is None else w.device, **extra))

    def _copy_s(self, model: DeviceModel, src_node: str, dst_node: str) -> float:
        if self.storage is not None:  # every restore reads the checkpoint from storage (sim/storage.py)
            return self.storage.download_s(model.checkpoint_mb)
        return 0.0 if src_node == dst_node else model.checkpoint_mb / self.copy_bandwidth_mb_s

    def _make_runnable(self, t: Trial) -> None:
        t.status = TrialStatus.PAUSED if t.started else TrialStatus.PENDING
        self.runnable.add(t)

    def _take(self, t: Trial) -> None:
        self.runnable.discard(t)
        t.version += 1

    # ----------------------------------------------------------------- run
    def run(self) -> SimResult:
        """Run to completion and return the event log."""
        for w in self.workers:
            self._emit("worker_added", worker=w, devices=w.devices)
        if self.faults is not None and self.faults.enabled:
            self._start_faults(self.faults, self.inputs.cluster, self.seed)
            self._dispatch()
            try:
                self.env.run(until=self._done)
            except RuntimeError:  # nothing left to happen before the last trial stopped: a stall
                pass
        else:
            self._dispatch()
            self.env.run()
        if self.unfinished:
            raise SimulationError(
                f"strategy {self.strategy.name!r} stalled at t={self.events[-1]['t']:.1f}s with "
                f"{self.unfinished} trial(s) unfinished")
        for w in self.workers:
            if not w.retired and not w.down:
                self._emit("worker_removed", worker=w, devices=w.devices)
        return SimResult(self.events, self.trials, self.workers)

    def _dispatch(self) -> None:
        """Offer work to idle workers, in the order they went idle, while runnable trials remain.

        Called synchronously (not by waking every idle worker). Where the strategy declares idle
        groups (``Strategy.idle_group``), a group answered Idle is skipped until an answer changes
        the run (sim/idle.py), so a run with 4,096 mostly idle workers costs O(1) questions per
        chunk, not O(workers); ``hints = "verify"`` asks every skipped worker too and fails on any
        answer other than Idle; ``"off"`` asks every idle worker.
        """
        order = DispatchPass(self._idle, self.hints != "off")
        for w in order:
            if not self.runnable or not self.unfinished:
                return
            decision = self.asker.ask(self.strategy, w, self.view, self.trials)
            if isinstance(decision, Idle):
                if self.hints == "verify":
                    verify_idle(self.strategy, self.view, w, order.skipped(w), self.env.now)
                order.block(w)
                continue
            order.changed()
            self._idle.remove(w)
            w.idle = False
            self._decided(w, decision)
            if isinstance(decision, Retire):
                self._retire(w)
            else:
                self._reserve(decision, w)
                self._procs[w.id] = self.env.process(self._work(w, decision))

    def _decided(self, w: Worker, decision: Decision) -> None:
        """Record the strategy's answer for ``w`` (an Idle answer is not an event: nothing changes)."""
        if isinstance(decision, Run):
            self._emit("decision", self.trials[decision.trial], w, action="run", iterations=decision.iterations,
                       restart=decision.restart)
        elif isinstance(decision, Retire):
            self._emit("decision", None, w, action="retire", iterations=0)

    def _retire(self, w: Worker) -> None:
        w.retired = True
        if w.resident is not None:
            w.resident.resident = None
            w.resident = None
        self._emit("worker_removed", worker=w, devices=w.devices)

    def _work(self, w: Worker, decision: Run):
        """A busy worker: run chunks until the strategy says idle or retire (or its node fails)."""
        try:
            yield from self._chunks(w, decision)
        except simpy.Interrupt:  # its node failed (sim/faults.py): the trial goes back to its checkpoint
            self._fail_trial(self.trials[self._running[w.id]], w)
            self._dispatch()

    def _chunks(self, w: Worker, decision: Run):
        while True:
            self._running[w.id] = decision.trial
            yield from self._run_chunk(w, self.trials[decision.trial], max(1, decision.iterations), decision.restart)
            # This worker decides first (it holds its trial in memory), then idle workers get the rest.
            nxt = self.asker.ask(self.strategy, w, self.view, self.trials) if self.unfinished else IDLE
            self._decided(w, nxt)
            if isinstance(nxt, Run):
                self._reserve(nxt, w)
                self._dispatch()
                decision = nxt
                continue
            if isinstance(nxt, Retire):
                self._retire(w)
            else:
                self._idle.add(w)
                w.idle = True
            self._procs.pop(w.id, None)
            self._dispatch()
            return

    def _reserve(self, decision: Run, w: Worker) -> None:
        t = self.trials[decision.trial]
        if t.id not in self.runnable:
            raise SimulationError(f"strategy {self.strategy.name!r} chose trial {t.id} which is {t.status}")
        self._take(t)
        t.status = TrialStatus.RUNNING
        if t.resident is not w or decision.restart:
            # Tune holds a trial PENDING from when it is chosen until its actor is up (then it
            # restores, RUNNING); Ray's PBT pauses a trial at its perturbation point while another is
            # PENDING, and stages no paused trial while its pick is still starting (tune-default)
            self.starting.add(t.id)

    def _started(self, t: Trial) -> None:
        """``t``'s process is up: a strategy that waited for it is asked again."""
        self.starting.discard(t.id)
        if self.strategy.asks_when_started:
            self._dispatch()

    def _bring(self, w: Worker, t: Trial, restart: bool):
        """Make ``t`` resident on ``w``: the worker's previous trial is paused, and ``t`` starts, or
        restarts from its checkpoint, unless ``w`` already holds it in memory."""
        dm = w.model
        if restart and t.resident is w:  # Ray's PBT paused it at its perturbation point
            self._leave(t, w)
        # Switching: the trial this worker held is paused (its state is checkpointed).
        if w.resident is not None and w.resident is not t:
            self._leave(w.resident, w)
        if t.resident is w:
            return
        if t.resident is not None:  # held in memory by another, idle worker: release it
            t.resident.resident = None
        if not t.started:
            start_s = self.noise.start_s(t, dm)
            yield self.env.timeout(start_s)
            self._started(t)
            t.started = True
            self._emit("trial_start", t, w, config=dict(t.config), duration_s=start_s)
        else:
            assert t.ckpt is not None
            restart_s, copy_s, load_s = self.noise.restore_s(t, dm, self._copy_s(dm, t.ckpt.node, w.node))
            dur = restart_s + copy_s + load_s
            if self.strategy.asks_when_started:  # it is up after restart_s, then restores
                yield self.env.timeout(restart_s)
                self._started(t)
                yield self.env.timeout(copy_s + load_s)
            else:  # one timeout, so that the order of simultaneous events stays as it always was
                yield self.env.timeout(dur)
                self._started(t)
            self._emit("resume", t, w, duration_s=dur, load_s=load_s, copy_s=copy_s)
        t.resident = w
        w.resident = t

    def _run_chunk(self, w: Worker, t: Trial, wanted: int, restart: bool = False):
        dm = w.model
        yield from self._bring(w, t, restart)
        if self.hooks and t.last_step_s is not None and w.step_time_s != t.last_step_s:
            left = 1.0 - t.iteration / self.stop_iterations
            for effect in move_effects(self.hooks, t.id, t.last_step_s, w.step_time_s, left):
                t.step_factor *= effect.step_factor
                if effect.event:
                    self._emit(effect.event, t, w, **dict(effect.fields), step_factor=t.step_factor)
        t.last_step_s = w.step_time_s
        # Compute: stop at the next checkpoint boundary and at the iteration limit. The trainable
        # evaluates at every checkpoint interval and at its last iteration, nowhere else.
        ci = self.info.checkpoint_interval
        k = min(wanted, ci - (t.iteration % ci), self.stop_iterations - t.iteration, self._to_time_point(t, w))
        evaluates = (t.iteration + k) % ci == 0 or t.iteration + k >= self.stop_iterations
        eval_s = self.eval_s(dm, w) if evaluates else 0.0
        train_s, eval_s = self.noise.chunk_s(t, w.device, dm, k, k * w.step_time_s * t.step_factor, eval_s)
        dur = train_s + eval_s
        w.inflight = (self.env.now, w.step_time_s * t.step_factor, k)
        yield self.env.timeout(dur)
        w.inflight = None
        t.iteration += k
        t.time_total_s += dur  # the seconds inside Trainable.step (training and evaluation), as Tune counts
        self.remaining -= k
        self.model.chunk(t, k, evaluates)
        self._emit("chunk", t, w, iterations=k, duration_s=dur, eval_s=eval_s)
        self.asker.chunk(self.strategy, w, t, k, dur, self.view, self.trials)
        reached = evaluates and t.accuracy is not None and t.accuracy >= self.info.target_accuracy
        if reached and self.time_to_target is None:
            self.time_to_target = self.env.now
        stops = reached and not self.info.budget_mode  # in budget mode trials train on to their stop iteration
        if stops or t.iteration >= self.stop_iterations:
            self._stop(t, w, "target_accuracy" if stops else "stop_iterations")
            return
        # Every chunk end saves: the strategy may move the trial to another worker next.
        up = {} if self.storage is None else {"upload_s": self.storage.upload_s(dm.checkpoint_mb)}
        save_s = self.noise.save_s(t, dm, up.get("upload_s", 0.0))
        yield self.env.timeout(save_s)
        t.ckpt = Checkpoint(t.iteration, t.progress, dict(t.config), w.node, t.accuracy, t.time_total_s)
        self._emit("checkpoint", t, w, duration_s=save_s, **up)
        self._release_waiters(t)
        t.at_point = self.strategy.pbt and self._at_perturbation_point(t)
        if t.at_point:
            self._perturb(t, w)
        if t.status != TrialStatus.WAITING:  # synch PBT's barrier, or a replayed clone waiting for its donor
            self._make_runnable(t)

    def eval_s(self, dm: DeviceModel, w: Worker) -> float:
        """Seconds of one evaluation on ``w``: DeviceModel.eval_time_s scaled to experiment.eval_samples."""
        return dm.eval_time_s(w.devices, w.kind) * self.info.eval_samples / 10_000

    def _stop(self, t: Trial, w: Worker, reason: str) -> None:
        t.status = TrialStatus.STOPPED
        self.remaining -= self.stop_iterations - t.iteration
        self.unfinished -= 1
        self.ranking.remove(t.id)
        t.resident = None
        w.resident = None
        self._emit("stop", t, w, reason=reason)
        if not self.unfinished and not self._done.triggered:
            self._done.succeed()
        self._release_waiters(t)
        if self.pbt.synch and self._barrier:
            self._maybe_release_barrier()


def simulate(inputs: RunInputs, strategy: Strategy, seed: int, population: PopulationModel | None = None,
             hooks: Sequence[MoveHook] = (), view_log: ViewLog | None = None,
             seconds: RecordedSeconds | None = None, max_events: int | None = None) -> SimResult:
    """Simulate one run: ``Simulation(...).run()`` with the view log flushed at the end (the arguments are
    Simulation's; ``strategy`` a fresh instance, e.g. ``inputs.make_strategy("hrfs")``); past ``max_events``
    events it stops with EventLimitReached, carrying the events so far."""
    sim = Simulation(inputs, strategy, seed, population, hooks, view_log, seconds)
    if max_events is not None:
        sim.max_events = max_events
    try:
        return sim.run()
    except (LearningModelFailed, EventLimitReached) as exc:  # the caller keeps what ran (events.partial.jsonl)
        exc.events = sim.events
        raise
    finally:
        sim.asker.flush()
