"""``hetune calibrate``: probe every (device type, model, batch size) cell through Ray and write the fits.

Cells run one at a time (timings taken while other probes share the host would
be wrong). The output file is rewritten atomically after every cell, so Ctrl-C
leaves a valid file with the finished cells and ``--resume`` runs only the rest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hetune.calibrate.build import DEFAULT_PARALLEL_FRACTION, build_file, fit_cells, holdout_errors
from hetune.calibrate.fit import amdahl_parallel_fraction
from hetune.calibrate.storage import measure_storage, open_storage
from hetune.real.discovery import DeviceTarget, discover, local_resources
from hetune.sim.cluster import ClusterConfig, load_cluster
from hetune.sim.enums import DeviceKind
from hetune.sim.errors import ConfigError
from hetune.sim.throughput import Sample, load_calibration
from hetune.sim.tomlfile import atomic_write_toml, read_toml

CLASSES = {"resnet18": 10, "resnet50": 100}  # ResNet-18 on CIFAR-10, ResNet-50 on CIFAR-100
DATASET = {"resnet18": "cifar10", "resnet50": "cifar100"}


@dataclass
class CalibrateRequest:
    """What to measure.

    Args:
        cluster: cluster config path.
        models: model names.
        batch_sizes: batch sizes used in the fit (samples).
        steps: timed steps per cell.
        out: output calibration file.
        warmup: untimed steps first.
        repeat: repeats per cell (spread reported).
        holdout: extra batch sizes measured only to check the fit.
        merge: keep the output file's other device types.
        resume: skip cells already in the output file.
        address: Ray address ("" = start a local Ray).
        data_dir: CIFAR folder ("" = synthetic batches).
        stem: the network, "cifar" or "imagenet" (recorded in every row).
        devices: only these device types ("" = all of the cluster).
        overheads: also run the Ray Tune probe of trial start, pause and resume, save and restore
            per (model, device type) (calibrate/overheads.py).
        under_load: time every cell (and the overheads probe) while the cluster's other worker slots
            train (calibrate/load.py): for an emulated cluster whose device types share this
            host's cores; refused with an address.
        storage: the checkpoint storage to measure (a path or URI, as real.storage_path takes it;
            calibrate/storage.py); "" = none: the file gets no [storage] table.
        shared_storage: that path is a file system every node mounts.
    """

    cluster: str
    models: list[str]
    batch_sizes: list[int]
    steps: int
    out: str
    warmup: int = 2
    repeat: int = 1
    holdout: list[int] = field(default_factory=list)
    merge: bool = False
    resume: bool = False
    address: str = ""
    data_dir: str = ""
    stem: str = "cifar"
    devices: list[str] = field(default_factory=list)
    overheads: bool = True
    under_load: bool = False
    storage: str = ""
    shared_storage: bool = False


def validate(req: CalibrateRequest) -> ClusterConfig:
    """Refuse bad requests before Ray starts; returns the cluster config."""
    for m in req.models:
        if m not in CLASSES:
            raise ConfigError("--models", "", f"unknown model {m!r} (known: {', '.join(CLASSES)})")
    if not req.models:
        raise ConfigError("--models", "", "name at least one model")
    for b in req.batch_sizes + req.holdout:
        if b <= 0:
            raise ConfigError("--batch-sizes", "", f"batch sizes must be > 0, got {b}")
    if not req.batch_sizes:
        raise ConfigError("--batch-sizes", "", "name at least one batch size")
    if req.steps < 1:
        raise ConfigError("--steps", "", f"must be >= 1, got {req.steps}")
    if req.repeat < 1:
        raise ConfigError("--repeat", "", f"must be >= 1, got {req.repeat}")
    if req.stem not in ("imagenet", "cifar"):
        raise ConfigError("--stem", "", f"must be imagenet or cifar, got {req.stem!r}")
    if req.under_load and req.address:
        raise ConfigError("--under-load", "", "is for an emulated cluster on this host, whose device types share "
                          "its cores; on a Ray cluster (--address) devices do not share cores: leave it off")
    cluster = load_cluster(req.cluster)
    for d in req.devices:
        if d not in cluster.devices:
            raise ConfigError("--devices", "", f"device type {d!r} is not in {req.cluster}")
    if req.data_dir:
        from hetune.real.cifar import load_cifar
        for m in req.models:
            load_cifar(req.data_dir, DATASET[m], "test", limit=1)
    if (req.merge or req.resume) and Path(req.out).exists():
        old = load_calibration(req.out)  # a broken existing file is refused, not overwritten
        for m in req.models:
            other = sorted(d for d, dm in old.models.get(m, {}).items() if dm.stem != req.stem)
            if other:  # one file, one network per model
                raise ConfigError("--stem", "", f"{req.out} holds {m} rows of another network "
                                  f"(models.{m}.{other[0]}.stem); calibrate into another file")
    return cluster


def _connect(req: CalibrateRequest, cluster: ClusterConfig):
    import os

    from hetune.real.ray_init import init_ray

    if req.address:
        return init_ray(req.address)
    # "local": always a new local instance. With no address Ray joins the cluster named in
    # /tmp/ray/ray_current_cluster, which a killed run leaves behind, and then refuses num_cpus
    return init_ray("local", num_cpus=os.cpu_count() or 1, resources=local_resources(cluster),
                    include_dashboard=False)


def _probe_task(model: str, batch: int, steps: int, warmup: int, target: DeviceTarget, stem: str,
                data: Any, seed: int) -> dict[str, Any]:
    from hetune.calibrate.probe import probe
    gpu = target.kind == DeviceKind.GPU
    return probe(model, CLASSES[model], batch, steps, warmup, device="cuda" if gpu else "cpu",
                 threads=0 if gpu else target.num_cpus, slowdown=target.slowdown, stem=stem,
                 eval_samples=min(1000, max(batch, 256)), data=data, seed=seed)


def _versions(ray: Any) -> dict[str, str]:
    import torch
    return {"torch": torch.__version__, "cuda": str(torch.version.cuda), "ray": ray.__version__,
            "python": platform.python_version()}


def run_calibration(req: CalibrateRequest, report: Callable[[str], None] = print,
                    progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Measure, fit and write the calibration file; returns a report (spreads, held-out errors, missing types).

    Args:
        req: the request.
        report: where to print lines (warnings, missing device types).
        progress: called with (cell description, done, total).
    """
    cluster = validate(req)
    if req.storage:  # unreachable storage is refused before anything is measured
        open_storage(req.storage)
    base = read_toml(req.out) if (req.merge or req.resume) and Path(req.out).exists() else None
    done_cells = set()
    samples: list[Sample] = []
    if req.resume and base:
        old = load_calibration(req.out)
        samples = [s for s in old.samples if s.ok]
        done_cells = {(s.model, s.device, s.batch, s.repeat) for s in samples}
    ray = _connect(req, cluster)
    try:
        targets = discover(cluster, ray.nodes())
        if req.devices:
            targets = [t for t in targets if t.device in req.devices]
        missing = [t for t in targets if not t.found]
        for t in missing:
            report(f"warning: device type {t.device!r} of {req.cluster} is not in the Ray cluster: {t.reason}")
        data_ref = _put_data(req, ray)
        cells = [(t, m, b, r, b in req.holdout and b not in req.batch_sizes, t.device)
                 for t in targets for m in req.models for b in sorted(set(req.batch_sizes + req.holdout))
                 for r in range(req.repeat)]
        cells += _scaling_cells(cluster, targets, req)
        extras_raw: dict[tuple[str, str], list[dict[str, Any]]] = {}
        provenance = _provenance(req, targets, ray)
        device_names: dict[str, str] = {}
        total = len(cells)
        for i, (t, model, batch, rep, heldout, name) in enumerate(cells):
            desc = f"{name} {model} batch {batch}" + (f" repeat {rep}" if req.repeat > 1 else "")
            if progress:
                progress(desc, i, total)
            if (model, name, batch, rep) in done_cells:
                continue
            if not t.found:
                samples.append(Sample(model, name, batch, ok=False, reason=t.reason, repeat=rep, heldout=heldout))
                continue
            try:
                res, wall = _time_cell(req, ray, cluster, t, model, batch, rep, data_ref.get(model))
            except Exception as exc:  # OOM at a large batch, a lost node: record and go on
                reason = str(getattr(exc, "cause", None) or exc).strip().splitlines()[-1][:200]
                samples.append(Sample(model, name, batch, ok=False, reason=reason, repeat=rep, heldout=heldout))
                report(f"warning: cell {desc} failed: {reason}")
                _write(req, samples, extras_raw, provenance, device_names, base)
                continue
            steps = res["step_times_s"]
            mean = statistics.fmean(steps)
            samples.append(Sample(model, name, batch, round(mean, 6), True, "", rep,
                                  round((max(steps) - min(steps)) / mean, 4), heldout))
            device_names[t.device] = res["device_name"]
            if name == t.device:  # not a thread-scaling cell (those give their step time only)
                extras_raw.setdefault((model, t.device), []).append(_cell_extras(req, t, batch, res, wall))
            _write(req, samples, extras_raw, provenance, device_names, base)
        overheads = _measure_overheads(req, [t for t in targets if t.found], base, report,
                                       lambda t, model, batch: _load(req, ray, cluster, t, model, batch))
        if overheads:
            provenance["overheads"] = ("start_overhead_s, resume_s, save_s, load_s: a Ray Tune probe per model and "
                                       "device type (calibrate/overheads.py: one trial started, paused twice, resumed)")
        storage = _measure_storage(req, extras_raw, report)
        if progress:
            progress("done", total, total)
        data = _write(req, samples, extras_raw, provenance, device_names, base, overheads, storage)
    finally:
        ray.shutdown()
    fits = {k: v for k, v in fit_cells(samples).items() if "@" not in k[1]}  # not the thread-scaling cells
    return {"missing": [t.device for t in missing], "fits": fits, "holdout": holdout_errors(samples, fits),
            "spread": _repeat_spread(samples), "warnings": data[1], "failed": [s for s in samples if not s.ok]}


def _put_data(req: CalibrateRequest, ray: Any) -> dict[str, Any]:
    """Per model, a Ray object holding the CIFAR images its cells train on (none: synthetic batches)."""
    if not req.data_dir:
        return {}
    from hetune.real.cifar import load_cifar

    need = max(req.batch_sizes + req.holdout) * (req.steps + req.warmup)
    return {m: ray.put(load_cifar(req.data_dir, DATASET[m], "train", limit=need)) for m in req.models}


def _provenance(req: CalibrateRequest, targets: list[Any], ray: Any) -> dict[str, Any]:
    """Where the calibration's numbers come from: host, date, data, settings, emulation, load, versions."""
    return {
        "source": "measured", "host": platform.node(), "date": dt.date.today().isoformat(),
        "data": f"CIFAR from {req.data_dir}" if req.data_dir else "synthetic CIFAR-shaped batches",
        "stem": req.stem, "steps": req.steps, "warmup": req.warmup, "repeat": req.repeat,
        "emulated": ", ".join(f"{t.device} = slowed {t.slowdown:g}x on purpose" for t in targets if t.slowdown > 1)
                    or "none",
        "load": ("under load: every cell timed while the cluster's other worker slots trained "
                 "(calibrate/load.py)") if req.under_load else "idle: every cell timed alone",
        **_versions(ray)}


def _time_cell(req: CalibrateRequest, ray: Any, cluster: Any, t: Any, model: str, batch: int, rep: int,
               data: Any) -> tuple[dict[str, Any], float]:
    """One cell's probe on its device type (under load when asked): the probe's result and its wall seconds."""
    # max_calls=1: every cell gets a fresh worker process, so start_overhead_s includes what a
    # Ray Tune trial (re)start pays: process start, torch import, model build.
    remote = ray.remote(num_cpus=t.num_cpus, num_gpus=t.num_gpus, resources=t.resources or None,
                        max_retries=0, max_calls=1)(_probe_task)
    with _load(req, ray, cluster, t, model, batch):
        t0 = time.perf_counter()  # the load's start-up is not the cell's start overhead
        res = ray.get(remote.remote(model, batch, req.steps, req.warmup, t, req.stem, data, rep))
    return res, time.perf_counter() - t0


def _cell_extras(req: CalibrateRequest, t: Any, batch: int, res: dict[str, Any], wall: float) -> dict[str, Any]:
    """A cell's costs beside its step time: evaluation (scaled to the 10,000-image test set), checkpoint
    size, save and load, and its start overhead (the task's wall time beyond the measured work)."""
    steps = res["step_times_s"]
    worked = sum(steps) * (1 + req.warmup / req.steps) + res["eval_s"] + res["save_s"] + res["load_s"]
    return {"eval_s": res["eval_s"] * 10_000 / min(1000, max(batch, 256)),
            "checkpoint_mb": res["checkpoint_mb"], "save_s": res["save_s"], "load_s": res["load_s"],
            "start_overhead_s": max(0.0, wall - worked), "cores": t.num_cpus, "kind": t.kind,
            "gradient_mb": 4 * res["params"] / 1e6}


def _repeat_spread(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per cell measured more than once: relative spread (max - min) / median of the repeats' means."""
    by: dict[tuple[str, str, int], list[float]] = {}
    for s in samples:
        if s.ok:
            by.setdefault((s.model, s.device, s.batch), []).append(s.step_time_s)
    return [{"model": m, "device": d, "batch": b, "spread": (max(v) - min(v)) / statistics.median(v)}
            for (m, d, b), v in sorted(by.items()) if len(v) > 1]


def _scaling_cells(cluster: ClusterConfig, targets: list[DeviceTarget],
                   req: CalibrateRequest) -> list[tuple[DeviceTarget, str, int, int, bool, str]]:
    """Cells timing a CPU type at other thread counts (1, and the most cores one of its nodes has) at
    every batch size asked for, wherever a strategy could give a worker other core counts: Amdahl's
    parallel fraction is fitted per batch size from them (threads pay off less on small batches: 1.9x
    at batch 16, 1.2x at batch 8 on the build host). Sample device: "<type>@<threads>"."""
    out: list[Any] = []
    for t in targets:
        if t.kind != DeviceKind.CPU:
            continue
        most = max(g.cpus for _, g in cluster.node_names() if g.device == t.device)
        for n in sorted({1, most} - {t.num_cpus}):
            out.extend((dataclasses.replace(t, num_cpus=n), m, b, 0, False, f"{t.device}@{n}")
                       for m in req.models for b in sorted(req.batch_sizes))
    return out


def parallel_fractions(samples: list[Sample], model: str, device: str, ref_cores: int
                       ) -> tuple[float, dict[str, float]] | None:
    """Amdahl parallel fractions from the "<device>@<threads>" cells against the device's own fit:
    (median over every cell, median per batch size timed, keyed by the batch as a string)."""
    fits = fit_cells(s for s in samples if s.device == device and s.model == model)
    if (model, device) not in fits:
        return None
    fit = fits[(model, device)][0]
    by_batch: dict[int, list[float]] = {}
    for s in samples:
        if s.ok and s.model == model and s.device.startswith(f"{device}@"):
            p = amdahl_parallel_fraction(fit.predict(s.batch), ref_cores, s.step_time_s, int(s.device.split("@")[1]))
            by_batch.setdefault(s.batch, []).append(p)
    return (statistics.median([p for ps in by_batch.values() for p in ps]),
            {str(b): round(statistics.median(ps), 4) for b, ps in sorted(by_batch.items())}) if by_batch else None


def _load(req: CalibrateRequest, ray: Any, cluster: ClusterConfig, t: DeviceTarget, model: str, batch: int) -> Any:
    """The background load of a cell (calibrate/load.py) under --under-load; else nothing."""
    import contextlib

    if not req.under_load or t.kind != DeviceKind.CPU:
        return contextlib.nullcontext()
    from hetune.calibrate.load import Load, load_slots

    return Load(ray, load_slots(cluster, t.device, t.num_cpus), model, CLASSES[model], batch, req.stem)


def _measure_overheads(req: CalibrateRequest, targets: list[DeviceTarget], base: dict[str, Any] | None,
                       report: Callable[[str], None],
                       load: Callable[[DeviceTarget, str, int], Any]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (model, device type): the trial overheads of a Ray Tune probe (kept from --out on --resume)."""
    from hetune.calibrate.overheads import measure_overheads

    out: dict[tuple[str, str], dict[str, float]] = {}
    if not req.overheads:
        return out
    for t in targets:
        for model in req.models:
            row = (base or {}).get("models", {}).get(model, {}).get(t.device, {})
            if req.resume and row.get("resume_s"):
                out[(model, t.device)] = {k: row[k] for k in ("start_overhead_s", "resume_s", "save_s", "load_s")}
                continue
            try:
                with load(t, model, min(req.batch_sizes)):
                    out[(model, t.device)] = measure_overheads(model, CLASSES[model], DATASET[model],
                                                               min(req.batch_sizes), t, req.stem)
            except Exception as exc:  # a probe that cannot run: the row keeps the cells' estimates
                report(f"warning: trial overheads of {model} on {t.device} not measured: "
                       f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return out


def _measure_storage(req: CalibrateRequest, extras_raw: dict[tuple[str, str], list[dict[str, Any]]],
                     report: Callable[[str], None]) -> dict[str, Any] | None:
    """The [storage] table: ``req.storage`` timed with the largest checkpoint measured (None without one)."""
    if not req.storage:
        return None
    from dataclasses import asdict

    mb = max((float(r["checkpoint_mb"]) for rows in extras_raw.values() for r in rows), default=0.0)
    model = measure_storage(req.storage, mb or 45.0, shared=req.shared_storage)  # 45 MB: a ResNet-18's
    report(f"storage {model.uri} ({model.kind}): upload {model.upload_mb_s:,.0f} MB/s, download "
           f"{model.download_mb_s:,.0f} MB/s, {model.request_s:.3f} s per request")
    return asdict(model)


def _write(req: CalibrateRequest, samples: list[Sample], extras_raw: dict[tuple[str, str], list[dict[str, Any]]],
           provenance: dict[str, Any], device_names: dict[str, str], base: dict[str, Any] | None,
           overheads: dict[tuple[str, str], dict[str, float]] | None = None, storage: dict[str, Any] | None = None):
    extras: dict[tuple[str, str], dict[str, Any]] = {}
    base_models = (base or {}).get("models", {})
    for key, rows in extras_raw.items():
        model, device = key
        ex: dict[str, Any] = {k: statistics.median(r[k] for r in rows)
                              for k in ("eval_s", "checkpoint_mb", "save_s", "load_s", "start_overhead_s",
                                        "gradient_mb")}
        ex["stem"] = req.stem
        ex.update((overheads or {}).get(key, {}))  # what a Tune trial pays, measured through Tune
        if rows[0]["kind"] == DeviceKind.CPU:
            ex["reference_cores"] = int(rows[0]["cores"])
            fractions = parallel_fractions(samples, model, device, ex["reference_cores"])
            if fractions is None:  # no node of this type has other core counts: no worker ever uses them
                p = base_models.get(model, {}).get(device, {}).get("parallel_fraction", DEFAULT_PARALLEL_FRACTION)
                fractions = (p, {})
            ex["parallel_fraction"] = round(fractions[0], 4)
            if fractions[1]:  # per batch size timed: threads share a small step worse than a large one
                ex["parallel_fraction_batch"] = fractions[1]
        extras[key] = ex
    prov = dict(provenance, devices={d: n for d, n in sorted(device_names.items())})
    data, warnings = build_file(samples, extras, prov, base)
    storage = storage or (base or {}).get("storage")  # --merge keeps a storage measured before
    if storage:
        data["storage"] = storage
    if data["models"]:
        Path(req.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_toml(req.out, data, header=f"Measured by `hetune calibrate` on {provenance['host']}; "
                                                "read by the simulator (sim/throughput.py).")
    return data, warnings
