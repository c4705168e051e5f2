"""``hetune validate``: run a strategy as a real Ray Tune PBT run and record it in the simulator's schema.

On this machine the cluster config is emulated with one Ray node per config
node on this host (``ray.cluster_utils.Cluster``): each node carries its
``device:<type>`` resource and a ``hetune-node:<name>`` label, and trials on
an emulated slow type sleep to be slower on purpose. ``--address`` runs on a
real Ray cluster instead.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from hetune.real.checkpoint_storage import run_storage_path
from hetune.real.ray_init import TuneOutput
from hetune.real.tune_args import pbt_kwargs
from hetune.sim import strategies as strategy_registry
from hetune.sim.cluster import WorkerSpec
from hetune.sim.enums import DeviceKind
from hetune.sim.errors import ConfigError, RunFailed
from hetune.sim.loader import RunInputs, load_inputs
from hetune.sim.pbt import sample_config
from hetune.sim.results import write_run
from hetune.sim.view_log import VIEWS_FILE

import numpy as np

PBT_DECISIONS = "pbt-decisions.jsonl"  # Ray's PBT's ranks, donors and explore operations (real/recorder.py)


def best_strategy(experiment_name: str, results: Path = Path("results")) -> str:
    """The best strategy of the latest sweep (ranking.json) of this experiment under ``results``."""
    found = []
    for f in results.rglob("ranking.json") if results.is_dir() else []:
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("experiment") == experiment_name and data.get("best"):
            found.append((f.stat().st_mtime, data["best"]))
    if not found:
        raise ConfigError("--strategy", "best", f"no sweep of experiment {experiment_name!r} under {results}/; "
                          "run `hetune sweep` first")
    return max(found)[1]


def strategy_workers(inputs: RunInputs, strategy: str) -> tuple[list[WorkerSpec], Any, Any]:
    """The strategy's instance, its workers and the calibration's step-time function."""
    info = inputs.experiment.experiment
    step_time_s = inputs.calibration.step_time_fn(info.model, info.batch_size, inputs.cluster)
    s = inputs.make_strategy(strategy)
    return s.workers(inputs.cluster, step_time_s), step_time_s, s


def _check_slots(ray: Any, slots: dict[str, dict[str, float]], strategy: str) -> None:
    """Refuse, in one line, a Ray cluster whose nodes do not declare the strategy's worker slots."""
    have = ray.cluster_resources()
    missing = {node: res for node, res in slots.items() if any(have.get(k, 0) < v for k, v in res.items())}
    if missing:
        node, res = next(iter(sorted(missing.items())))
        raise ConfigError("--address", "", f"{strategy} places trials on {sum(len(r) for r in slots.values())} "
                          f"worker slots, and {len(missing)} node(s) lack theirs: start node {node} with "
                          f"ray start --resources '{json.dumps(res)}' (every node's line: "
                          f"hetune slots EXP --strategy {strategy})")


def _start_ray(inputs: RunInputs, address: str, storage: str, shared: bool,
               slots: dict[str, dict[str, float]] | None = None):
    from hetune.real.ray_init import init_ray, quiet_logger, token_auth_as_ray_init_does

    if address:
        ray = init_ray(address)
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if len(alive) > 1 and not shared and "://" not in str(storage):
            ray.shutdown()
            raise ConfigError("real.storage_path", "", f"{storage} is a local path but the Ray cluster has "
                              f"{len(alive)} nodes: use shared storage (NFS path with real.shared_storage = true, "
                              "or s3://, gs://)")
        return ray, None
    from ray.cluster_utils import Cluster

    cluster = inputs.cluster
    if cluster.has_kind(DeviceKind.GPU):
        raise ConfigError(inputs.experiment.cluster.path, "nodes", "has GPU nodes, which cannot be emulated on "
                          "this machine; run on a Ray cluster with those GPUs (--address)")
    token_auth_as_ray_init_does()
    with quiet_logger("ray._private.utils"):  # "Overwriting previous Ray address" of another instance
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes: dict[str, tuple[Any, dict[str, Any]]] = {}
    c.hetune_nodes = nodes  # type: ignore[attr-defined]  # node name -> (handle, add_node arguments): what a fault removes and re-adds
    for name, g in cluster.node_names():
        args: dict[str, Any] = {"num_cpus": g.cpus, "resources": {f"device:{g.device}": float(g.cpu_workers()),
                                                  f"hetune-node:{name}": 1.0, **(slots or {}).get(name, {})}}
        nodes[name] = (c.add_node(**args), args)
    ray = init_ray(c.address, own=True)
    c.wait_for_nodes()
    return ray, c


@dataclass
class _Plan:
    """What a real run will do, settled before Ray starts (every refusal happens while making it)."""

    inputs: RunInputs
    strategy: str
    seed: int
    out: Path
    data: str  # the CIFAR folder ("" for the model trainable)
    storage: str  # Tune's storage_path: a local folder, or a URI (s3://...)
    workers: list[WorkerSpec]
    place: Any  # real/placement.py Placement
    resume: bool
    plain: bool

    @property
    def journal(self) -> Path:
        return self.out / "events.partial.jsonl"


def run_validate(experiment: str, overrides: list[str], strategy: str, out: Path, data_dir: str = "",
                 seed: int | None = None, report_interval_s: float = 300.0, address: str = "",
                 quiet: bool = False, resume: bool = False, plain: bool = False) -> dict[str, Any]:
    """One real run; writes events.jsonl, summary.json, config.toml into ``out`` and returns the summary.

    The run's story: settle and freeze its inputs (``_plan``), start or join Ray, check the cluster
    has what the strategy needs, build the trials' search space and the recording scheduler, run
    Tune, refuse a run that failed or was interrupted, write the result folder.

    Args:
        experiment: experiment file.
        overrides: ``--set`` strings.
        strategy: a strategy name, or "best" (latest sweep of this experiment).
        out: result folder.
        data_dir: CIFAR folder (overrides real.data_dir).
        seed: seed (default: the experiment's).
        report_interval_s: seconds between status tables.
        address: Ray cluster address ("" = emulate the cluster config on this machine).
        quiet: no status tables.
        resume: continue an interrupted run in ``out`` (Tuner.restore; journaled events kept).
        plain: Ray Tune's own PBT scheduling with no adapter (the tune-default reference run).
    """
    from hetune.real.provenance import this_host

    plan = _plan(experiment, overrides, strategy, out, data_dir, seed, resume, plain)
    exp = plan.inputs.experiment
    ray, emulated = _start_ray(plan.inputs, address, plan.storage, exp.real.shared_storage, plan.place.node_resources)
    try:
        _check_cluster(ray, plan)
        trainable, param_space = _trial_space(plan)
        log, scheduler, callbacks = _recording(plan, emulated, quiet, report_interval_s)
        tuner = _tuner(plan, trainable, param_space, scheduler, callbacks)
        if not resume:
            log.t0 = time.time()  # time 0 of the run: what start_overhead_s is measured from
        from ray.tune.error import TuneError
        try:
            with TuneOutput(plan.out / "tune-output.log"):  # Tune's banner and hints stay out of the terminal
                grid = tuner.fit()
        except TuneError as exc:  # Tune's controller itself failed: one line; its traceback is in the log
            last = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
            raise RunFailed(f"Ray Tune stopped the run: {last} (traceback in {plan.out / 'tune-output.log'}); "
                            f"the events so far are in {plan.journal}") from None
        if hasattr(scheduler, "flush_views"):  # not under --plain: Ray's own PBT asks no strategy
            scheduler.flush_views()
        _refuse_unfinished(grid, log, plan, experiment)
    finally:
        ray.shutdown()
        if emulated is not None:
            emulated.shutdown()
    summary = write_run(plan.out, plan.inputs, log.sorted_events(), plan.strategy, plan.seed,
                        extra={"kind": "real", "host": this_host()}, frozen=True)
    plan.journal.unlink(missing_ok=True)  # complete: events.jsonl has them all
    return summary


def _plan(experiment: str, overrides: list[str], strategy: str, out: Path, data_dir: str, seed: int | None,
          resume: bool, plain: bool) -> _Plan:
    """Load (or, resuming, reload the frozen) inputs, resolve the strategy and data, refuse what cannot
    run, and freeze the inputs into ``out`` before anything starts."""
    from hetune.real.cifar import FOLDERS, load_cifar, write_synthetic
    from hetune.real.digits import write_digits
    from hetune.real.placement import placement
    from hetune.real.provenance import calibration_note
    from hetune.sim.snapshot import MANIFEST, load_snapshot, write_snapshot

    inputs = load_inputs(experiment, overrides)
    # A resumed run continues with the inputs it froze at its start, not with what the experiment's
    # files hold now (a run interrupted before snapshots existed is frozen at its resume).
    frozen = resume and (out / MANIFEST).is_file()
    if frozen:
        inputs = load_snapshot(out)[0]
    exp = inputs.experiment
    info = exp.experiment
    if strategy == "best":
        strategy = best_strategy(info.name)
    strategy_registry.get_class(strategy)
    if frozen and strategy != exp.strategy.name:
        raise ConfigError("--strategy", "", f"{out} is a run of {exp.strategy.name!r}; resume it with that strategy")
    seed = info.seed if seed is None else seed
    workers, step_time_s, strategy_obj = strategy_workers(inputs, strategy)
    note = calibration_note(inputs.calibration.provenance, exp.calibration.path)
    if note:  # the run goes ahead; its comparison with the simulator will not describe this host
        print(f"hetune: note: {note}", file=sys.stderr)
    place = placement(strategy_obj, inputs.cluster, workers, step_time_s, plain=plain)  # refused before anything starts
    out = out.resolve()
    model_run = exp.real.trainable == "model"  # the learning model stands in for the network: no data
    if model_run or exp.real.synthetic:
        data = "" if model_run else str(out / "data")
    elif info.dataset == "digits":  # shipped: written into the run folder unless a folder is named
        data = data_dir or exp.real.data_dir or str(out / "data")
    else:
        data = data_dir or exp.real.data_dir
        if not data:
            raise ConfigError("--data-dir", "", "name the folder holding the CIFAR python folders "
                              "(or set real.synthetic = true for a smoke run)")
        load_cifar(data, info.dataset, "test", limit=1)  # refuse a missing folder before Ray starts
    storage = run_storage_path(exp.real.storage_path, out)  # an unreachable one is refused before anything starts
    if resume and not (out / "events.partial.jsonl").is_file():
        raise ConfigError(str(out), "", "nothing to resume here (no events.partial.jsonl of an interrupted run)")
    out.mkdir(parents=True, exist_ok=True)
    if not frozen:
        write_snapshot(out, inputs, strategy, seed, frozen="at --resume" if resume else "before the run started")
    digits_missing = info.dataset == "digits" and not Path(data, FOLDERS["digits"]).is_dir()
    if digits_missing and not model_run and not exp.real.synthetic:
        write_digits(data)
    if exp.real.synthetic and not model_run:
        write_synthetic(data, info.dataset, train=exp.real.synthetic_train, test=info.eval_samples, seed=seed,
                        signal=exp.real.synthetic_signal)
    return _Plan(inputs, strategy, seed, out, data, storage, workers, place, resume, plain)


def _check_cluster(ray: Any, plan: _Plan) -> None:
    """Refuse a Ray cluster without the device types or the slot resources the strategy's workers need."""
    from hetune.real.discovery import discover

    needed = {w.device for w in plan.workers}
    targets = {t.device: t for t in discover(plan.inputs.cluster, ray.nodes())}
    lacking = sorted(d for d in needed if not targets.get(d) or not targets[d].found)
    if lacking:
        raise ConfigError("--strategy", "", f"{plan.strategy} needs device type(s) {', '.join(lacking)} "
                          f"that the Ray cluster lacks")
    _check_slots(ray, plan.place.node_resources, plan.strategy)


def _trial_space(plan: _Plan) -> tuple[Any, dict[str, Any]]:
    """The trainable (with its resources) and the param space: the simulator's population for this seed."""
    from ray import tune

    exp, info, seed = plan.inputs.experiment, plan.inputs.experiment.experiment, plan.seed
    rng_root = np.random.SeedSequence(seed)
    initial = [sample_config(exp.pbt.mutations, np.random.default_rng(ss), exp.pbt.initial_config)
               for ss in rng_root.spawn(info.population)]  # the simulator's population for this seed
    slowdowns = {d: s.emulated_slowdown for d, s in plan.inputs.cluster.devices.items()}
    setup = {"model": info.model, "dataset": info.dataset, "num_classes": info.num_classes,
             "batch_size": info.batch_size, "stop_iterations": info.stop_iterations,
             "target_accuracy": info.target_accuracy, "checkpoint_interval": info.checkpoint_interval,
             "data_dir": plan.data, "eval_samples": info.eval_samples, "stem": info.stem,
             "threads": exp.real.threads, "slowdowns": slowdowns, "seed": seed,
             "fail_once_at_step": exp.real.fail_once_at_step, "fault_dir": str(plan.out / "faults")}
    trainable_cls, setup_key = _trainable(plan.inputs, setup)
    param_space: dict[str, Any] = {"trial_index": tune.grid_search(list(range(info.population))), setup_key: setup}
    for key in sorted(exp.pbt.mutations):
        param_space[key] = tune.sample_from(lambda config, k=key: initial[config["trial_index"]][k])  # type: ignore[misc]
    resources = {k.lower() if k in ("CPU", "GPU") else k: v for k, v in plan.place.resources.items()}
    return tune.with_resources(trainable_cls, resources), param_space


def _recording(plan: _Plan, emulated: Any, quiet: bool, report_interval_s: float) -> tuple[Any, Any, list[Any]]:
    """The event log (journaled for --resume), Ray's PBT wrapped by the strategy's scheduler, and the
    callbacks that record, prune checkpoints, replay faults and print the status table."""
    from hetune.real.checkpoints import PruneCheckpoints
    from hetune.real.node_faults import fault_callbacks
    from hetune.real.recorder import EventLog, RecorderCallback, RecordingPBT
    from hetune.real.status import StatusCallback

    exp, info, resume = plan.inputs.experiment, plan.inputs.experiment.experiment, plan.resume
    if not resume:
        plan.journal.unlink(missing_ok=True)
        (plan.out / PBT_DECISIONS).unlink(missing_ok=True)
    stop_accuracy = math.inf if info.budget_mode else info.target_accuracy  # budget mode: train on
    log = EventLog(plan.workers, info.checkpoint_interval, stop_accuracy, info.stop_iterations,
                   journal=None if resume else plan.journal)
    if resume:
        log.resume_from(plan.journal)
    recorder = RecorderCallback(log)
    pbt = RecordingPBT(log, recorder, record_pauses=plan.plain, decisions=plan.out / PBT_DECISIONS, **pbt_kwargs(exp))
    scheduler = plan.place.wrap(pbt, interval=exp.pbt.perturbation_interval, mode=exp.pbt.mode,
                                stop_iterations=info.stop_iterations, target_accuracy=info.target_accuracy,
                                on_pause=recorder.pause, checkpoint_interval=info.checkpoint_interval,
                                on_decision=lambda slot, decision: log.decision(slot.id, decision),
                                # on a real cluster the loss of a node is recorded when the scheduler sees
                                # it; on the emulated one, where hetune removes it, at that moment (fault_callbacks)
                                on_worker=None if emulated is not None else lambda slot, kind: log.worker_event(
                                    log.now(), kind, slot.id),
                                state_path=plan.out / "strategy-state.pkl", view_log=plan.out / VIEWS_FILE)
    if not plan.plain:
        log.placed = scheduler.last_slot  # the recorder files each chunk under the slot it ran on
        if resume:  # Tune does not save schedulers: the strategy's state comes from our own file
            scheduler.restore_strategy()
    callbacks: list[Any] = [recorder, PruneCheckpoints(pbt),
                            *fault_callbacks(plan.inputs, emulated, log, plan.seed, resume)]
    if not quiet:
        callbacks.append(StatusCallback(log, report_interval_s, info.batch_size))
    return log, scheduler, callbacks


def _tuner(plan: _Plan, trainable: Any, param_space: dict[str, Any], scheduler: Any, callbacks: list[Any]) -> Any:
    """A new Tuner, or (--resume) Tune's own restored one with our scheduler and callbacks."""
    from ray import tune

    info = plan.inputs.experiment.experiment
    # Tune snapshots its experiment state at most every 10 s by default, so a driver killed after a
    # trial's save could restore it from the save before (redoing two intervals); a snapshot at
    # every step (cheap at these sizes: 96 s of smoke-run makespan against 93 s without) bounds the loss
    # to one checkpoint interval. A value the user set is kept.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "0")
    name = f"{info.name}-{plan.strategy}"
    if plan.resume:
        from hetune.real.checkpoint_storage import storage_join

        tuner = tune.Tuner.restore(storage_join(plan.storage, name), trainable, resume_unfinished=True,
                                   param_space=param_space)
        # Tuner.restore brings back the pickled callbacks and scheduler of the first start;
        # ours carry the journaled events, so they replace them.
        internal: Any = tuner._local_tuner  # no public setter for callbacks on a restored Tuner
        internal.get_run_config().callbacks = callbacks
        internal._tune_config.scheduler = scheduler
        return tuner
    stop_accuracy = math.inf if info.budget_mode else info.target_accuracy
    return tune.Tuner(
        trainable, param_space=param_space,
        tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=False),
        # Stopping on the final result (before PBT may pause it) saves a restart just to return.
        run_config=tune.RunConfig(name=name, storage_path=plan.storage, verbose=0,
                                  stop=_Stop(info.stop_iterations, stop_accuracy),
                                  failure_config=tune.FailureConfig(max_failures=info.max_failures),
                                  # every interval, and on every pause (a class trainable saves on
                                  # demand); PruneCheckpoints deletes the ones nothing needs
                                  checkpoint_config=tune.CheckpointConfig(
                                      num_to_keep=None, checkpoint_frequency=info.checkpoint_interval),
                                  callbacks=callbacks))


def _refuse_unfinished(grid: Any, log: Any, plan: _Plan, experiment: str) -> None:
    """RunFailed when trials failed past max_failures; KeyboardInterrupt (with the --resume line) when
    Tune returned early, as it does on Ctrl-C: the journal and Tune's state stay for --resume."""
    info = plan.inputs.experiment.experiment
    failed = [grid[i].error for i in range(len(grid)) if grid[i].error is not None]
    if failed:  # past max_failures: the run cannot be completed as asked
        text = str(failed[0]).strip()
        first = text.splitlines()[-1][:200] if text else type(failed[0]).__name__
        raise RunFailed(f"{len(failed)} trial(s) failed more than experiment.max_failures "
                        f"({info.max_failures}) times; the last error: {first}; the events so far are in "
                        f"{plan.journal}")
    finished = {e["trial"] for e in log.events if e["kind"] == "stop"}
    if len(finished) < info.population:
        print(f"hetune: validate interrupted with {len(finished)} of {info.population} trials finished; "
              f"continue with: hetune validate {experiment} --strategy {plan.strategy} --out {plan.out} --resume",
              file=sys.stderr)
        raise KeyboardInterrupt


def _trainable(inputs: RunInputs, setup: dict[str, Any]) -> tuple[Any, str]:
    """The trainable class of ``real.trainable`` and its setup key; the model trainable's setup gains
    the learning model and the calibrated seconds it sleeps (real/model_trainable.py)."""
    if inputs.experiment.real.trainable == "model":
        from hetune.real.model_trainable import SETUP_KEY, ModelTrainable, device_seconds, learning_setup

        setup["model_setup"] = learning_setup(inputs)
        setup["device_seconds"] = device_seconds(inputs, inputs.experiment.real.model_sleep)
        return ModelTrainable, SETUP_KEY
    from hetune.real.trainable import SETUP_KEY as KEY, PBTTrainable

    return PBTTrainable, KEY


class _Stop:
    """Stop a trial on its final result (picklable, so Tuner.restore can bring it back)."""

    def __init__(self, stop_iterations: int, target_accuracy: float) -> None:
        self.stop_iterations = stop_iterations
        self.target_accuracy = target_accuracy

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return (result.get("step", 0) >= self.stop_iterations
                or result.get("accuracy", 0.0) >= self.target_accuracy)
