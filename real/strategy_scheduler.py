"""A Ray Tune scheduler driven by the simulator's own strategy objects: the second engine.

The strategy carves its workers from the cluster; each becomes a Ray slot (a custom resource
``hetune-worker:<i>`` on its node, see ``node_resources``). Whenever a slot is free the scheduler
asks ``strategy.assign(worker, view)`` with the same view protocol the simulator gives, places the
chosen trial there by changing its resources while it is paused (as Ray's ResourceChangingScheduler
does), pauses it when its chunk ends, leaves a retired slot empty for good and tells the strategy
what each chunk cost. PBT itself (ranking, exploit, explore) is the wrapped PopulationBasedTraining.

Tune starts PENDING trials without asking a scheduler, so every trial is held PAUSED when it is
added and starts only when the strategy places it. Usable in any Tuner::

    scheduler = StrategyScheduler(strategy, workers, step_time_s, cluster.device_kind, pbt, interval=10,
                                  mode="max", stop_iterations=1000)
    tune.Tuner(my_trainable, param_space=..., tune_config=tune.TuneConfig(scheduler=scheduler,
               reuse_actors=False), run_config=...)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

from hetune.real.recorder import trial_index
from hetune.real.slot_liveness import SlotLiveness, drop_pending_actor
from hetune.real.strategy_state import load_state, save_state
from hetune.real.strategy_view import Slot, TrialState, TuneView, slot_resource
from hetune.sim.cluster import WorkerSpec
from hetune.sim.enums import DeviceKind, TrialStatus
from hetune.sim.strategies.base import Retire, Run, Strategy
from hetune.sim.view_log import DIRECT, Direct, ViewLog

STALL_S = 30.0  # nothing running, nothing placed, every slot idle this long: the strategy has stalled
DOWN_STALL_S = 600.0  # the same while some slot's node is down


class StrategyStalled(RuntimeError):
    """Every worker answered Idle (or retired) while unfinished trials wait: the run cannot go on."""


def node_resources(workers: list[WorkerSpec]) -> dict[str, dict[str, float]]:
    """Node name -> the slot resources to declare on it (``ray start --resources``, or an emulated node)."""
    out: dict[str, dict[str, float]] = {}
    for i, w in enumerate(workers):
        out.setdefault(w.node, {})[slot_resource(i)] = 1.0
    return out


class StrategyScheduler(TrialScheduler):
    """Ray Tune scheduler placing PBT trials where a hetune strategy says.

    Args:
        strategy: a fresh strategy instance (sim/strategies).
        workers: ``strategy.workers(cluster, step_time_s)``: slot i is worker i.
        step_time_s: seconds per iteration for (device type, devices), from the calibration.
        kinds: device type -> its kind: ``ClusterConfig.device_kind``, or a mapping such as
            {"v100": "gpu"}.
        pbt: the PopulationBasedTraining doing ranking, exploit and explore.
        interval: its perturbation interval, iterations (what strategies size chunks by).
        mode: its mode, "max" or "min" (what best-ranked means).
        stop_iterations: a trial's iteration limit.
        target_accuracy: a trial stops on reaching it (the strategies' ``target_reached``).
        on_pause: called with a trial the scheduler pauses (the event recorder's hook).
        checkpoint_interval: iterations between the trainable's saves (0 = ``interval``): a chunk
            also ends at the next one, as the simulator's chunks do.
        on_decision: called with (slot, decision) for every Run or Retire the strategy answers (the
            event recorder's "decision" events, as the simulator writes them).
        state_path: where the strategy object is pickled after every answer and chunk, so that a
            resumed run (``Tuner.restore``, which does not save schedulers) continues with the
            strategy's state rather than a fresh one (``restore_strategy``).
        on_worker: called with (slot, "worker_removed" | "worker_added") when the Ray node under a
            slot dies or a node declaring it joins (real/slot_liveness.py); a trial that was
            running there is placed again by the strategy, from its checkpoint.
        view_log: where every view the strategy is asked with, and its answer, is written
            (sim/view_log.py: ``compare`` asks a fresh strategy object again with each).
    """

    def __init__(self, strategy: Strategy, workers: list[WorkerSpec], step_time_s: Callable[[str, int], float],
                 kinds: Mapping[str, str] | Callable[[str], str], pbt: PopulationBasedTraining, interval: int,
                 mode: str, stop_iterations: int, target_accuracy: float = 1.0,
                 on_pause: Callable[[Any], None] | None = None, checkpoint_interval: int = 0,
                 on_decision: Callable[[Slot, Run | Retire], None] | None = None,
                 state_path: str | Path | None = None,
                 on_worker: Callable[[Slot, str], None] | None = None,
                 view_log: str | Path | None = None) -> None:
        super().__init__()
        self.view_log_path = Path(view_log) if view_log else None
        self._views: Direct | None = None  # the log, opened at the first question (after a restore)
        self._views_kept: int | None = None  # lines of the log the restored strategy had seen
        self.liveness = SlotLiveness(on_worker)
        self.state_path = Path(state_path) if state_path else None
        self._pbt_saved: dict[int, dict[str, Any]] = {}  # PBT state per trial index, from restore_strategy
        self.on_decision = on_decision
        self.checkpoint_interval = checkpoint_interval or interval
        self.strategy = strategy
        self.pbt = pbt
        kind_of = kinds.__getitem__ if isinstance(kinds, Mapping) else kinds
        self.slots = [Slot(i, w, DeviceKind(kind_of(w.device)), step_time_s(w.device, w.devices))
                      for i, w in enumerate(workers)]
        self.trials: dict[int, TrialState] = {}
        self.target_accuracy = target_accuracy
        self.view = TuneView(self.slots, self.trials, interval, stop_iterations, mode)
        self.stop_iterations = stop_iterations
        self.on_pause = on_pause
        self.last_slot: dict[int, int] = {}  # trial index -> the slot it was last placed on (for the recorder)
        self._idle_since: float | None = None

    @classmethod
    def from_configs(cls, strategy: str, cluster: str | Path, calibration: str | Path, model: str,
                     batch_size: int, pbt: PopulationBasedTraining, stop_iterations: int,
                     target_accuracy: float = 1.0, params: dict[str, Any] | None = None) -> "StrategyScheduler":
        """A scheduler for a Ray Tune user's own Tuner, from hetune's config files.

        Args:
            strategy: a registered strategy name (``hetune strategies``).
            cluster: the cluster TOML its workers are carved from.
            calibration: the calibration TOML that times them (seconds per iteration).
            model: the calibration's model key, e.g. "resnet18".
            batch_size: samples per iteration.
            pbt: the user's PopulationBasedTraining (its perturbation interval and mode are read from it).
            stop_iterations: a trial's iteration limit.
            target_accuracy: the accuracy at which a trial stops.
            params: the strategy's parameters ([strategies.<name>] of an experiment).
        """
        from hetune.sim import strategies
        from hetune.sim.cluster import load_cluster
        from hetune.sim.throughput import load_calibration

        spec = load_cluster(cluster)
        step_time_s = load_calibration(calibration).step_time_fn(model, batch_size, spec, str(calibration))

        instance = strategies.create(strategy, strategies.parse_params(strategy, params, "params"))
        # Ray Tune 2.x keeps these as attributes of PopulationBasedTraining; there is no public getter.
        return cls(instance, instance.workers(spec, step_time_s), step_time_s, spec.device_kind, pbt,
                   interval=int(pbt._perturbation_interval), mode=pbt._mode or "max",
                   stop_iterations=stop_iterations, target_accuracy=target_accuracy)

    def node_resources(self) -> dict[str, dict[str, float]]:
        """Node name -> the slot resources it must declare (``ray start --resources '<json>'``)."""
        return node_resources([s.spec for s in self.slots])

    # ------------------------------------------------------------ PBT passes through
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return self.pbt.set_search_properties(metric, mode, **spec)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        self.pbt.on_trial_add(tune_controller, trial)
        i = trial_index(trial)
        saved = self._pbt_saved.pop(i, None)
        if saved is not None and trial in getattr(self.pbt, "_trial_state", {}):
            st = self.pbt._trial_state[trial]  # a resumed run: PBT goes on from its last perturbation
            if saved.get("last_result") is None:
                # PBT hands an exploiter the donor's checkpoint with the donor's last result as its
                # metrics; a checkpoint without them makes Tune's restore fail, so it is not offered
                saved["last_checkpoint"] = None
            for key, value in saved.items():
                if value is not None:
                    setattr(st, key, value)
        if i in self.trials and self.trials[i].status == TrialStatus.RUNNING:  # re-added after a failure
            slot = self._slot_of(trial)
            self.liveness.refresh(self.slots, force=True)
            if slot is not None and slot.down:
                self._free_from_lost(slot, tune_controller)
            return  # else it restarts on its own slot from its checkpoint
        state = self.trials.setdefault(i, TrialState(i))
        state.iteration = int((trial.last_result or {}).get("training_iteration", state.iteration))  # restored
        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            state.status = TrialStatus.STOPPED
            return
        if trial.status == Trial.PENDING:
            # Held until the strategy places it: on_trial_add runs before Tune files the trial
            # under its status, so a PAUSED trial is never started by Tune on its own.
            trial.set_status(Trial.PAUSED)
        state.status = TrialStatus.PENDING if state.iteration == 0 else TrialStatus.PAUSED

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self.pbt.on_trial_error(tune_controller, trial)  # a retried trial comes back through on_trial_add

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self.pbt.on_trial_complete(tune_controller, trial, result)
        self._finish(trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self.pbt.on_trial_remove(tune_controller, trial)
        self._finish(trial, None)

    # ------------------------------------------------------------ the strategy decides
    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        state = self.trials.setdefault(trial_index(trial), TrialState(trial_index(trial)))
        state.iteration = int(result.get("training_iteration", state.iteration))
        if "accuracy" in result:
            state.accuracy = float(result["accuracy"])
        if state.accuracy is not None and state.accuracy >= self.target_accuracy:
            self.view.target = True
        slot = self._slot_of(trial)
        if slot is not None:
            if slot.chunk_start_iter is None:  # restarted: from its own or (exploited) its donor's checkpoint
                slot.chunk_start_iter = state.iteration - 1
            slot.chunk_seconds += float(result.get("step_s", 0.0)) + float(result.get("eval_s", 0.0))
        if self.strategy.pbt:  # a baseline without PBT (random-search) never ranks, exploits or explores
            self.pbt.on_trial_result(tune_controller, trial, result)  # may exploit: Tune then restarts the trial
        if slot is None:  # a trial Tune runs outside the strategy's slots; exploited, it waits paused
            return TrialScheduler.NOOP if trial.status == Trial.PAUSED else TrialScheduler.CONTINUE
        if trial.status == Trial.PAUSED:  # exploited: it restarts from the donor's checkpoint, wherever placed
            self._end_chunk(slot, state)
            self._release(slot, state)
            return TrialScheduler.NOOP
        if state.iteration < self._chunk_end(slot):
            return TrialScheduler.CONTINUE  # mid-chunk; PBT's "pause when others wait" is the strategy's call
        self._end_chunk(slot, state)
        state.status = TrialStatus.PAUSED  # runnable again, so the strategy may choose it for this worker
        slot.resident = state  # in memory here, as the simulator's worker holds its trial at a chunk end
        decision = self._ask(slot)
        if isinstance(decision, Run) and decision.trial == state.id and not decision.restart:
            self._start_chunk(slot, trial, state, decision.iterations, state.iteration)
            return TrialScheduler.CONTINUE
        self._release(slot, state)
        if isinstance(decision, Retire):
            slot.retired = True
        elif isinstance(decision, Run):  # another trial, or this one restarted (Ray PBT's pause)
            self._reserve(slot, decision, tune_controller)
        if self.on_pause is not None:
            self.on_pause(trial)
        return TrialScheduler.PAUSE

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        # A trial waiting to restart on its slot may wait for a node Ray has since declared dead
        # (the actor's death can come before the node's): poll, and free it for the strategy.
        restarting = [s for s in self.slots if s.trial is not None and not s.reserved
                      and s.trial.status == Trial.PENDING]
        self.liveness.refresh(self.slots, poll=bool(restarting))  # and a lost node's slots come back
        for slot in restarting:
            if slot.down:
                self._free_from_lost(slot, tune_controller)
        for slot in self.slots:  # a trial that failed for good (no retries left) frees its slot
            if slot.trial is not None and slot.trial.status in (Trial.ERROR, Trial.TERMINATED):
                self._finish(slot.trial, None)
        for slot in self.slots:
            if slot.idle:
                decision = self._ask(slot)
                if isinstance(decision, Retire):
                    slot.retired = True
                elif isinstance(decision, Run):
                    self._reserve(slot, decision, tune_controller)
            # A chosen trial starts once Tune has it paused: one the scheduler just paused is still
            # saving (RUNNING) for a moment.
            if slot.reserved and slot.trial.status in (Trial.PAUSED, Trial.PENDING):
                slot.reserved = False
                return self._place(slot, slot.trial)
        self._check_stall(tune_controller)
        return None

    # ------------------------------------------------------------ bookkeeping
    def _free_from_lost(self, slot: Slot, tune_controller: Any) -> None:
        """``slot``'s node is gone: its trial loses the work since its checkpoint (Tune restores it)
        and waits, paused, for the strategy to place it on another slot."""
        trial = slot.trial
        slot.trial, slot.reserved, slot.chunk_start_iter, slot.resident = None, False, None, None
        self.trials[trial_index(trial)].status = TrialStatus.PAUSED
        if trial.status == Trial.PENDING:  # Tune filed it as pending already: move it through Tune
            drop_pending_actor(tune_controller, trial)
            tune_controller._set_trial_status(trial, Trial.PAUSED)

    def restore_strategy(self) -> bool:
        """Continue with the strategy object ``state_path`` holds (a resumed run); False if none."""
        saved = load_state(self.state_path, type(self.strategy))
        if saved is None:
            return False  # none saved, or another strategy's state: start fresh rather than mix them
        self.strategy, self._pbt_saved, self._views_kept = saved
        return True

    def _persist(self) -> None:
        if self.state_path is not None:  # with the lines of the view log this state has seen
            save_state(self.state_path, self.strategy, self.pbt, self._asker().flush())

    def _asker(self) -> Direct:
        """What every question to the strategy goes through: the view log, or DIRECT without one."""
        if self._views is None:
            self._views = DIRECT if self.view_log_path is None else ViewLog(
                self.view_log_path, self.strategy.name, self.view.mode, "real", keep=self._views_kept)
        return self._views

    def flush_views(self) -> None:
        """Write out the view log's buffered lines (at the end of a run)."""
        self._asker().flush()

    def _ask(self, slot: Slot) -> Any:
        """The strategy's answer for ``slot``, reported to ``on_decision`` unless it is Idle."""
        decision = self._asker().ask(self.strategy, slot, self.view, self.trials.values())
        if self.on_decision is not None and isinstance(decision, (Run, Retire)):
            self.on_decision(slot, decision)
        if isinstance(decision, (Run, Retire)):
            self._persist()
        return decision

    def _chunk_end(self, slot: Slot) -> int:
        """Where the slot's chunk ends: the iterations asked for, capped at the next save and the limit
        (the simulator's rule, so that both engines ask the strategy at the same points)."""
        start = slot.chunk_start_iter or 0
        ci = self.checkpoint_interval
        return min(start + slot.chunk_len, start - start % ci + ci, self.stop_iterations)

    def _slot_of(self, trial: Trial) -> Slot | None:
        return next((s for s in self.slots if s.trial is trial), None)

    def _start_chunk(self, slot: Slot, trial: Trial, state: TrialState, iterations: int,
                     start: int | None = None) -> None:
        """Give ``trial`` to ``slot`` for ``iterations``, counted from ``start`` (None: from the iteration
        its first result shows, since a restarted trial resumes from a checkpoint)."""
        slot.trial, slot.resident = trial, None
        slot.chunk_start_iter = start
        slot.chunk_len = max(1, iterations)
        self.last_slot[state.id] = slot.id
        slot.chunk_seconds = 0.0
        state.status = TrialStatus.RUNNING

    def _end_chunk(self, slot: Slot, state: TrialState) -> None:
        done = 0 if slot.chunk_start_iter is None else state.iteration - slot.chunk_start_iter
        if done > 0:
            self._asker().chunk(self.strategy, slot, state, done, slot.chunk_seconds, self.view, self.trials.values())
        slot.chunk_start_iter = state.iteration
        slot.chunk_seconds = 0.0

    def _release(self, slot: Slot, state: TrialState) -> None:
        slot.trial = None
        slot.resident = state if state.status != TrialStatus.STOPPED else None
        if state.status == TrialStatus.RUNNING:
            state.status = TrialStatus.PAUSED

    def _reserve(self, slot: Slot, decision: Run, tune_controller: Any) -> None:
        state = self.trials.get(decision.trial)
        if state is None or not state.status.runnable:
            raise RuntimeError(f"strategy {self.strategy.name!r} chose trial {decision.trial}, which is "
                               f"{'unknown' if state is None else state.status}")
        trial = next(t for t in tune_controller.get_trials() if trial_index(t) == decision.trial)
        self._start_chunk(slot, trial, state, decision.iterations)
        slot.reserved = True

    def _place(self, slot: Slot, trial: Trial) -> Trial:
        trial.update_resources(slot.resources())  # allowed while paused; Tune starts it on the slot's node
        for other in self.slots:
            if other is not slot and other.resident is not None and other.resident.id == trial_index(trial):
                other.resident = None
        self._idle_since = None
        return trial

    def _finish(self, trial: Trial, result: dict | None) -> None:
        state = self.trials.setdefault(trial_index(trial), TrialState(trial_index(trial)))
        if result:
            state.iteration = int(result.get("training_iteration", state.iteration))
        slot = self._slot_of(trial)
        if slot is not None:
            self._end_chunk(slot, state)
        state.status = TrialStatus.STOPPED
        if slot is not None:
            self._release(slot, state)
        for s in self.slots:
            if s.resident is state:
                s.resident = None

    def _check_stall(self, tune_controller: Any) -> None:
        waiting = any(t.status.runnable for t in self.trials.values())
        busy = any(s.trial is not None for s in self.slots)
        if not waiting or busy or any(t.status == Trial.RUNNING for t in tune_controller.get_trials()):
            self._idle_since = None
            return
        now = time.monotonic()
        self._idle_since = self._idle_since or now
        # a lost node may come back (a replacement declares its slots): wait longer before giving up
        if now - self._idle_since > (DOWN_STALL_S if any(s.down for s in self.slots) else STALL_S):
            unfinished = sum(t.status != TrialStatus.STOPPED for t in self.trials.values())
            raise StrategyStalled(f"strategy {self.strategy.name!r} left every worker idle with "
                                  f"{unfinished} trial(s) unfinished")

    def debug_string(self) -> str:
        busy = sum(s.trial is not None for s in self.slots)
        return f"StrategyScheduler({self.strategy.name}): {busy}/{len(self.slots)} workers busy"
