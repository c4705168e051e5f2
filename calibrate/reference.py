"""Build configs/calibration/reference.toml from published Gavel throughputs and CPU timings.

    python -m hetune.calibrate.reference --gavel ../shared/data/gavel_physical_cluster_throughputs.csv \
        --cpu cpu-timings.json --out configs/calibration/reference.toml

GPU rows: step time 1 / steps_per_s for one GPU, fitted over batch sizes 16-256
(batch 512 is an extrapolation); multi-GPU efficiency is the median over batch
sizes and GPU counts of (speedup - 1) / (n - 1). ResNet-50 rows are ImageNet
(224x224), so they overstate ResNet-50 on CIFAR-100 step times. Evaluation,
checkpoint and start costs of GPUs are estimates (documented in the file).
CPU rows come from ``hetune calibrate``-style probes on this machine at 1 and
2 threads; the parallel fraction of Amdahl's law is fitted from the two.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import platform
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from hetune.calibrate.fit import amdahl_parallel_fraction, fit_step_time
from hetune.sim.tomlfile import atomic_write_toml

GAVEL_MODELS = {"ResNet-18": "resnet18", "ResNet-50": "resnet50"}
TEST_SAMPLES = 10_000  # CIFAR test set
CKPT_MB = {"resnet18": 89.5, "resnet50": 190.1}  # measured here: weights + SGD momentum
DISK_MB_S = 500.0  # assumed local SSD for checkpoint save/load on GPU hosts
GPU_START_S = 5.0  # assumed: Ray actor start, CUDA context, model build
CPU_START_S = 2.0  # assumed: Ray actor start, model build


def gavel_models(path: Path) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    """Fit GPU device models from a Gavel throughput CSV."""
    single: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    multi: dict[tuple[str, str], dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in csv.DictReader(path.open()):
        model = GAVEL_MODELS.get(row["model"])
        sps = float(row["steps_per_s"])
        if model is None or sps <= 0:  # 0 = the cell failed (out of memory) in Gavel's data
            continue
        key = (model, row["gpu"])
        n, b = int(row["num_gpus"]), int(row["batch_size"])
        multi[key][b][n] = sps
        if n == 1:
            single[key].append((b, 1.0 / sps))
    models: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    samples = []
    for (model, gpu), pts in sorted(single.items()):
        pts.sort()
        fit = fit_step_time([b for b, _ in pts], [t for _, t in pts])
        effs = [(by_n[n] / by_n[1] - 1.0) / (n - 1) for by_n in multi[(model, gpu)].values() if 1 in by_n
                for n in by_n if n > 1]
        eff = min(1.0, max(0.0, statistics.median(effs))) if effs else 0.9
        eval_s = (TEST_SAMPLES / 512) * fit.alpha_s + TEST_SAMPLES * fit.beta_s_per_sample / 3.0
        models[model][gpu] = {
            "alpha_s": round(fit.alpha_s, 6), "beta_s_per_sample": round(fit.beta_s_per_sample, 8),
            "eval_s": round(eval_s, 4), "checkpoint_mb": CKPT_MB[model],
            "save_s": round(CKPT_MB[model] / DISK_MB_S, 4), "load_s": round(CKPT_MB[model] / DISK_MB_S, 4),
            "start_overhead_s": GPU_START_S, "multi_device_efficiency": round(eff, 4),
            "r2": round(fit.r2, 4), "source": "published"}
        samples.extend({"model": model, "device": gpu, "batch": b, "step_time_s": round(t, 6)} for b, t in pts)
    return models, samples


def cpu_models(timings: dict[str, Any]) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    """Fit CPU device models from probe timings keyed "model/threads/batch"."""
    by: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for key, v in timings.items():
        model, threads, batch = key.split("/")
        by[(model, int(threads))].append((int(batch), v))
    models: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    samples = []
    for model in sorted({m for m, _ in by}):
        two = sorted(by[(model, 2)])
        one = dict(by[(model, 1)])
        fit = fit_step_time([b for b, _ in two], [v["step"] for _, v in two])
        ps = [amdahl_parallel_fraction(v["step"], 2, one[b]["step"], 1) for b, v in two if b in one]
        largest = two[-1][1]
        eval_per_sample = largest["eval_s"] / 512
        base = {"alpha_s": round(fit.alpha_s, 6), "beta_s_per_sample": round(fit.beta_s_per_sample, 8),
                "eval_s": round(eval_per_sample * TEST_SAMPLES, 3), "checkpoint_mb": round(largest["mb"], 2),
                "save_s": round(largest["save_s"], 4), "load_s": round(largest["load_s"], 4),
                "start_overhead_s": CPU_START_S, "reference_cores": 2,
                "parallel_fraction": round(statistics.median(ps), 4), "r2": round(fit.r2, 4), "source": "measured"}
        models[model]["cpu"] = base
        # Emulated device types of configs/clusters/local.toml: one core each, the slow one 3x slower.
        models[model]["cpu-fast"] = dict(base, reference_cores=1, alpha_s=round(fit.alpha_s * _one_core(base), 6),
                                         beta_s_per_sample=round(fit.beta_s_per_sample * _one_core(base), 8),
                                         eval_s=round(base["eval_s"] * _one_core(base), 3))
        models[model]["cpu-slow"] = dict(models[model]["cpu-fast"],
                                         alpha_s=round(models[model]["cpu-fast"]["alpha_s"] * 3, 6),
                                         beta_s_per_sample=round(models[model]["cpu-fast"]["beta_s_per_sample"] * 3, 8),
                                         eval_s=round(base["eval_s"] * _one_core(base) * 3, 3))
        for threads in (1, 2):
            samples.extend({"model": model, "device": f"cpu@{threads}", "batch": b, "step_time_s": round(v["step"], 6)}
                           for b, v in sorted(by[(model, threads)]))
    return models, samples


def _one_core(base: dict[str, Any]) -> float:
    p = base["parallel_fraction"]
    return (1 - p) + p * 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gavel", type=Path, required=True)
    ap.add_argument("--cpu", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    gpu, gpu_samples = gavel_models(args.gavel)
    cpu, cpu_samples = cpu_models(json.loads(args.cpu.read_text()))
    models = {m: {**gpu.get(m, {}), **cpu.get(m, {})} for m in sorted(set(gpu) | set(cpu))}
    data = {
        "provenance": {
            "gpu_source": "published: Gavel (stanford-futuredata/gavel c4fa400), "
                          "scheduler/physical_cluster_throughputs.json, single-job rows; Narayanan et al., OSDI 2020; MIT License",
            "gpu_caveats": "ResNet-50 rows are ImageNet (224x224), not CIFAR-100; batch 512 is extrapolated from 16-256; "
                           "eval_s, save_s, load_s and start_overhead_s of GPUs are estimates (disk 500 MB/s, start 5 s, "
                           "eval = forward ~ 1/3 of a training step over 10,000 test images)",
            "cpu_source": f"measured here: torchvision ResNet (ImageNet stem), synthetic CIFAR-shaped batches, "
                          f"SGD momentum 0.9, torch threads 1 and 2, host {platform.node()}",
            "cpu_scaling": "step_time(cores) = step_time(reference_cores) * ((1 - p) + p * reference_cores / cores), "
                           "p = parallel_fraction fitted from the 1- and 2-thread timings (Amdahl's law)",
            "emulated": "cpu-fast and cpu-slow are this CPU at one core; cpu-slow is slowed 3x on purpose",
            "date": dt.date.today().isoformat(),
        },
        "models": models,
        "samples": gpu_samples + cpu_samples,
    }
    atomic_write_toml(args.out, data, header="Step-time models read by the simulator; built by `python -m hetune.calibrate.reference` (see its docstring).\nA calibration measured on your own hardware (`hetune calibrate`) always takes precedence over this file.")


if __name__ == "__main__":
    main()
