"""Record a real Ray Tune run in the simulator's event schema (sim/events.py).

A Tune Callback turns trial starts, results, checkpoints, pauses, stops and
errors into events; the recording PBT scheduler adds exploit and explore
events. Times are wall-clock seconds since ``Tuner.fit()`` was called: a trial's start
overhead (Tune's set-up, actor and process start, data, model build) is part of the run, as
the simulator's ``start_overhead_s``, measured the same way by calibrate/overheads.py. Workers are the
slots of the strategy's worker list: a trial running on node N holds the
lowest free slot of N, so the same timeline and utilization code serves both.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, cast

from ray.tune import Callback
from ray.tune.schedulers import PopulationBasedTraining

from hetune.sim.cluster import WorkerSpec
from hetune.sim.events import make_event
from hetune.sim.tomlfile import atomic_replace


def trial_index(trial: Any) -> int:
    """Tune trial ids end in a 5-digit creation index ("3f2a1_00004" -> 4)."""
    return int(str(trial.trial_id).rsplit("_", 1)[-1])


class EventLog:
    """Events of a real run, shared by the callback and the scheduler (both live in the driver)."""

    def __init__(self, workers: list[WorkerSpec], checkpoint_interval: int, target_accuracy: float,
                 stop_iterations: int, t0: float | None = None, journal: Path | None = None) -> None:
        self.t0 = time.time() if t0 is None else t0
        self.events: list[dict[str, Any]] = []
        self.journal = journal  # every event is also appended here at once, so an interrupted run keeps them
        self.resumed = False
        self.workers = workers
        self.interval = checkpoint_interval
        self.target = target_accuracy
        self.stop_iterations = stop_iterations
        self.slot_of: dict[int, int] = {}  # trial -> worker slot
        self.placed: dict[int, int] | None = None  # trial -> slot, when a StrategyScheduler places trials
        self.state: dict[int, dict[str, Any]] = {}
        for i in range(len(workers)):
            self.worker_event(0.0, "worker_added", i)

    def worker_event(self, t: float, kind: str, worker: int) -> None:
        """Record ``worker_added`` or ``worker_removed`` for worker ``worker`` at run time ``t``, seconds."""
        w = self.workers[worker]
        self.add(make_event(t, kind, worker=worker, node=w.node, device=w.device, devices=w.devices))

    def add(self, ev: dict[str, Any]) -> None:
        """Record one event (and journal it)."""
        self.events.append(ev)
        if self.journal is not None:
            with self.journal.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(ev, separators=(",", ":")) + "\n")

    def resume_from(self, journal: Path) -> None:
        """Continue an interrupted run: its journaled events come back, the clock continues after them,
        and every trial's progress is rebuilt (a truncated last line is dropped)."""
        events = []
        for line in journal.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.endswith("\n"):
                events.append(json.loads(line))
        self.events = [e for e in events if e["kind"] != "worker_removed"]
        readings: dict[tuple[int, int], Any] = {}
        for e in self.events:
            if e["trial"] is None:
                continue
            st = self.state.setdefault(e["trial"], {"iteration": 0, "accuracy": None, "started": False})
            st["started"] = st["started"] or e["kind"] == "trial_start"
            if e["kind"] == "chunk":
                st["iteration"], st["accuracy"] = e["iteration"], e["accuracy"]
                st["logged"] = [e["iteration"], e["accuracy"]]
                readings[(e["trial"], e["iteration"])] = e["accuracy"]
            if e["kind"] == "exploit":  # it goes on from the donor's checkpoint
                st["logged"] = [e["donor_iteration"], readings.get((e["donor"], e["donor_iteration"]))]
            if e["kind"] == "stop":
                st["stopped"] = True
            st["last_worker"] = e["worker"]
            st["worker"] = None
            st["fresh"] = True
            st["journaled"] = True  # its first result after the restart says what was redone
        last = max((e["t"] for e in self.events), default=0.0)
        self.t0 = time.time() - last
        self.resumed = True
        # rewritten whole (a torn last line dropped): a kill during the rewrite keeps the old journal
        atomic_replace(journal, "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.events))
        self.journal = journal

    def now(self, wall: float | None = None) -> float:
        return max(0.0, (time.time() if wall is None else wall) - self.t0)

    def _slot(self, trial: int, node: str, device: str) -> int:
        if trial in self.slot_of:
            return self.slot_of[trial]
        if self.placed is not None and trial in self.placed:
            self.slot_of[trial] = self.placed[trial]
            return self.slot_of[trial]
        busy = set(self.slot_of.values())
        free = [i for i, w in enumerate(self.workers) if w.node == node and i not in busy]
        free = free or [i for i, w in enumerate(self.workers) if w.device == device and i not in busy]
        slot = free[0] if free else len(self.workers) - 1
        self.slot_of[trial] = slot
        return slot

    def release(self, trial: int) -> None:
        self.slot_of.pop(trial, None)

    def emit(self, t: float, kind: str, trial: int, st: dict[str, Any], **extra: Any) -> None:
        w = st.get("worker")
        self.add(make_event(
            t, kind, trial=trial, iteration=st.get("iteration", 0), accuracy=st.get("accuracy"), worker=w,
            node=None if w is None else self.workers[w].node, device=None if w is None else self.workers[w].device,
            **extra))

    def decision(self, worker: int, decision: Any) -> None:
        """A strategy's Run or Retire for ``worker`` (a StrategyScheduler's on_decision)."""
        trial = getattr(decision, "trial", None)
        st = self.state.get(trial, {}) if trial is not None else {}
        w = self.workers[worker]
        run = trial is not None
        self.add(make_event(self.now(), "decision", trial=trial, iteration=st.get("iteration", 0) if run else None,
                            accuracy=st.get("accuracy") if run else None, worker=worker, node=w.node, device=w.device,
                            action="run" if run else "retire", iterations=getattr(decision, "iterations", 0),
                            restart=bool(getattr(decision, "restart", False))))

    def sorted_events(self) -> list[dict[str, Any]]:
        """Events in time order (the scheduler's and the callback's interleave)."""
        return sorted(self.events, key=lambda e: e["t"])


class RecorderCallback(Callback):
    """Turn Tune's trial lifecycle into events."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        st = self.log.state.setdefault(trial_index(trial), {"iteration": 0, "accuracy": None, "started": False})
        if st.get("worker") is not None:  # restarted without a pause we saw (e.g. new resources)
            self._end(trial, "pause")
        st["start_wall"] = time.time()
        st["fresh"] = True

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        log = self.log
        i = trial_index(trial)
        st = log.state.setdefault(i, {"iteration": 0, "accuracy": None, "started": False, "start_wall": time.time()})
        wall = float(result.get("wall_time", time.time()))
        work = float(result["step_s"]) + float(result["eval_s"])
        if st.get("fresh"):
            st["fresh"] = False
            st["worker"] = log._slot(i, str(result["node"]), str(result["device"]))
            t_work_start = wall - work
            overhead = max(0.0, t_work_start - st["start_wall"])
            restored = st["chunk_start_iter"] = int(result["step"]) - 1
            st["chunk_s"] = 0.0
            # what the log itself last recorded of the trial: a PBT scheduler has already set
            # st["iteration"] to this result's step, one past where the trial started from
            logged, reading = st.get("logged", [0, None])
            if st.pop("journaled", False) and not st.get("stopped") and logged > restored:
                # the driver stopped (Ctrl-C, a kill): Tune restored the trial from an earlier save than
                # the journal reached, so the iterations between are trained again
                log.emit(log.now(t_work_start), "failure", i, {**st, "iteration": logged, "accuracy": reading},
                         reason=f"driver restarted; redone from the checkpoint at iteration {restored}",
                         lost_iterations=logged - restored)
            at = {**st, "iteration": restored, "accuracy": reading if logged == restored else None}
            if not st["started"]:
                st["started"] = True
                log.emit(log.now(t_work_start), "trial_start", i, at, config=_hp(trial.config), duration_s=overhead)
            else:
                # copy_s: the checkpoint's download from storage (0 from a file system, read in place)
                log.emit(log.now(t_work_start), "resume", i, at, duration_s=overhead,
                         load_s=float(result["load_s"]), copy_s=float(result.get("download_s", 0.0)))
        st["chunk_s"] = st.get("chunk_s", 0.0) + float(result["step_s"]) + float(result["eval_s"])
        st["chunk_eval_s"] = st.get("chunk_eval_s", 0.0) + float(result["eval_s"])
        st["iteration"] = int(result["step"])
        st["accuracy"] = float(result["accuracy"])
        if result.get("loss") is not None:
            st.setdefault("losses", []).append(float(result["loss"]))
        # A chunk ends where the trial saves (every checkpoint interval, or a pause: a class trainable
        # saves on demand) and where it stops; the scheduler has already decided on this result.
        if (st["iteration"] % log.interval == 0 or st.get("pause_pending") or st["iteration"] >= log.stop_iterations
                or st["accuracy"] >= log.target):
            self._chunk(i, st, wall)
        if st.pop("pause_pending", False):  # the scheduler decided before this callback ran
            self._end(trial, "pause")

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
        """A save: every checkpoint interval, a pause, or PBT's save of a top-quantile trial."""
        log = self.log
        st = log.state.get(trial_index(trial))
        if st is None:
            return
        now = time.time()
        try:  # from Tune's storage, wherever it is: a folder here, or an object store (s3://...)
            fs = getattr(checkpoint, "filesystem", None)
            path = f"{str(checkpoint.path).rstrip('/')}/meta.json"
            if fs is None:
                meta = json.loads(Path(path).read_text())
            else:
                with fs.open_input_stream(path) as fh:
                    meta = json.loads(fh.read())
        except (OSError, ValueError):  # not one of our trainable's checkpoints
            meta = {}
        worker = st.get("worker")
        if worker is None:  # the save of a pause, recorded after the pause decision
            st["worker"] = st.get("last_worker")
        # Tune reports a save once the trial's process has also copied it to storage_path: the time
        # since save_checkpoint ended is that upload (and the report's way back to the driver)
        up = {"upload_s": round(max(0.0, now - float(meta["wall_time"])), 6)} if "wall_time" in meta else {}
        log.emit(log.now(float(meta.get("wall_time", time.time()))), "checkpoint", trial_index(trial), st,
                 duration_s=float(meta.get("save_s", 0.0)), **up)
        st["worker"] = worker

    def _chunk(self, i: int, st: dict[str, Any], wall: float) -> None:
        """The iterations since the last chunk end, as one chunk ending at ``wall``."""
        done = st["iteration"] - st.get("chunk_start_iter", st["iteration"])
        losses = st.pop("losses", [])
        if done > 0:
            # the training loss for the learning-model fit: one mini-batch per step is too noisy, so the
            # mean over the chunk's last quarter (calibrate/tune_folder.py reads Ray's results alike)
            tail = losses[-max(1, len(losses) // 4):]
            loss = {"loss": round(sum(tail) / len(tail), 6)} if tail and all(map(math.isfinite, tail)) else {}
            self.log.emit(self.log.now(wall), "chunk", i, st, iterations=done, duration_s=st.get("chunk_s", 0.0),
                          eval_s=st.get("chunk_eval_s", 0.0), **loss)
        st["chunk_start_iter"] = st["iteration"]
        st["logged"] = [st["iteration"], st["accuracy"]]
        st["chunk_s"] = 0.0
        st["chunk_eval_s"] = 0.0

    def _end(self, trial: Any, kind: str, **extra: Any) -> None:
        """The trial leaves its slot: pause, stop or failure (a stop is recorded even when paused)."""
        log = self.log
        i = trial_index(trial)
        st = log.state.get(i)
        if st is None or st.get("stopped"):
            return
        if st.get("worker") is None:
            if kind == "pause":
                return
            st["worker"] = st.get("last_worker")
        log.emit(log.now(), kind, i, st, **extra)
        log.release(i)
        st["last_worker"] = st["worker"]
        st["worker"] = None
        st["fresh"] = True
        st["stopped"] = kind == "stop"

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        st = self.log.state.get(trial_index(trial), {})
        reason = "target_accuracy" if (st.get("accuracy") or 0) >= self.log.target else "stop_iterations"
        self._end(trial, "stop", reason=reason)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        st = self.log.state.get(trial_index(trial), {})
        lost = st.get("iteration", 0) - st.get("chunk_start_iter", 0)  # work since its last save
        self._end(trial, "failure", reason=str(getattr(trial, "error_file", "") or "trial error"), lost_iterations=lost)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        st = self.log.state.get(trial_index(trial), {})
        lost = st.get("iteration", 0) - st.get("chunk_start_iter", 0)  # work since its last save
        self._end(trial, "failure", reason="trial failed; restarting from its last checkpoint", lost_iterations=lost)

    def pause(self, trial: Any) -> None:
        """Called by the scheduler when it pauses a running trial; recorded after the result's chunk."""
        self.log.state.setdefault(trial_index(trial), {"iteration": 0, "accuracy": None, "started": True})[
            "pause_pending"] = True

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        end = max([e["t"] for e in self.log.events] + [0.0])
        for i in range(len(self.log.workers)):
            self.log.worker_event(end, "worker_removed", i)


def _hp(config: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in sorted(config.items()) if isinstance(v, (int, float)) and not isinstance(v, bool)}


class RecordingPBT(PopulationBasedTraining):
    """Ray Tune's PBT, unchanged, that also logs every exploit and explore as events and, where
    ``decisions`` names a file, every decision it makes with what it saw (one JSON line each):
    ``rank`` (at a trial's perturbation point: every scored trial's last score, the lower and upper
    quantiles), ``donor`` (the top-quantile trial a bottom one drew to clone, and the candidates) and
    ``explore`` (the operation per hyperparameter). Ray's own random draws are what they were."""

    def __init__(self, log: EventLog, recorder: RecorderCallback, record_pauses: bool = True,
                 decisions: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hetune_log = log
        self._hetune_recorder = recorder
        # False under a StrategyScheduler, which overrules PBT's pauses and records its own
        self._hetune_record_pauses = record_pauses
        self._hetune_decisions = str(decisions) if decisions else None
        self._hetune_at: int | None = None  # the trial whose result PBT is deciding on
        self._hetune_upper: list[int] = []
        self._hetune_ops: dict[str, str] = {}

    def _record(self, kind: str, **fields: Any) -> None:
        if self._hetune_decisions is not None:  # appended per decision (a few per perturbation point)
            with open(self._hetune_decisions, "a") as fh:
                fh.write(json.dumps({"t": round(self._hetune_log.now(), 6), "kind": kind, "trial": self._hetune_at,
                                     **fields}) + "\n")

    def _quantiles(self) -> tuple[list[Any], list[Any]]:
        lower, upper = super()._quantiles()
        scores = {trial_index(t): st.last_score for t, st in self._trial_state.items()
                  if st.last_score is not None and not t.is_finished()}
        self._hetune_upper = sorted(trial_index(t) for t in upper)
        self._record("rank", scores={str(k): v for k, v in sorted(scores.items())},
                     lower=sorted(trial_index(t) for t in lower), upper=self._hetune_upper)
        return lower, upper

    def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict, dict]:
        new_config, operations = super()._get_new_config(trial, trial_to_clone)
        self._hetune_ops = {str(k): str(v) for k, v in sorted(operations.items())}
        return new_config, operations

    def _exploit(self, tune_controller: Any, trial: Any, trial_to_clone: Any) -> None:
        log = self._hetune_log
        i, d = trial_index(trial), trial_index(trial_to_clone)
        st = log.state.setdefault(i, {"iteration": 0, "accuracy": None, "started": True})
        donor_state = self._trial_state[trial_to_clone]
        # The checkpoint PBT kept at the donor's last perturbation point, where last_result was set
        donor_iter = int(cast(Any, (donor_state.last_result or {}).get("step", 0)))
        old = _hp(trial.config)
        log.emit(log.now(), "exploit", i, st, donor=d, donor_iteration=donor_iter, duration_s=0.0, load_s=0.0,
                 copy_s=0.0)
        st["logged"] = [donor_iter, (donor_state.last_result or {}).get("accuracy")]  # it goes on from there
        self._record("donor", donor=d, candidates=self._hetune_upper)
        self._hetune_ops = {}
        super()._exploit(tune_controller, trial, trial_to_clone)
        self._record("explore", operations=self._hetune_ops)
        log.emit(log.now(), "explore", i, st, old_config=old, new_config=_hp(trial.config),
                 operations=self._hetune_ops)
        self._hetune_recorder.pause(trial)  # Tune pauses the trial to restart it from the donor's checkpoint

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        # The scheduler sees a result before the recorder callback does: an exploit decided
        # here is at the result's iteration and accuracy.
        st = self._hetune_log.state.setdefault(trial_index(trial), {"iteration": 0, "accuracy": None, "started": True})
        st["iteration"], st["accuracy"] = int(result.get("step", 0)), float(result.get("accuracy", 0.0))
        self._hetune_at = trial_index(trial)
        decision = super().on_trial_result(tune_controller, trial, result)
        if decision == self.PAUSE and self._hetune_record_pauses:  # time-multiplexing: a paused or pending trial waits
            self._hetune_recorder.pause(trial)
        return decision
