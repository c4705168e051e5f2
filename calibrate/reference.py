"""Build configs/calibration/reference.toml from published Gavel throughputs and CPU timings.

    python -m hetune.calibrate.cpu_timings --out configs/calibration/cpu-timings.json   # CPU rows, this host
    python -m hetune.calibrate.reference --gavel ../shared/data/gavel_physical_cluster_throughputs.csv \
        --cpu configs/calibration/cpu-timings.json --out configs/calibration/reference.toml

Every row is the CIFAR network (3x3 stem, no max pool: ``stem = "cifar"``).

GPU rows: step time 1 / steps_per_s for one GPU, fitted over batch sizes 16-256
(batch 512 is an extrapolation). Gavel's multi-GPU rows are weak scaling (each
GPU keeps its batch, the total grows) and are not used: the simulator times a
data-parallel worker at a fixed global batch from the one-GPU fit and the
all-reduce of ``gradient_mb`` over the node's link (sim/throughput.py).
Gavel's ResNet-18 is the CIFAR network; its ResNet-50 is the ImageNet one at
224x224, so CIFAR ResNet-50 GPU rows are derived by a stated rule: the
per-sample cost is scaled by the ratio of multiply-accumulates per image
(FLOP_RATIO) and the fixed per-step cost is kept; those rows are "fitted".
Evaluation, checkpoint and start costs of GPUs are estimates (documented in
the file). CPU rows come from ``hetune.calibrate.cpu_timings`` probes at 1 and
2 threads on the host named in the file; the parallel fraction of Amdahl's law
is fitted from the two.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from hetune.calibrate.fit import amdahl_parallel_fraction, fit_step_time
from hetune.sim.tomlfile import atomic_write_toml

GAVEL_MODELS = {"ResNet-18": "resnet18", "ResNet-50": "resnet50"}
TEST_SAMPLES = 10_000  # CIFAR test set
# Multiply-accumulates per image, counted with forward hooks on torchvision's networks: CIFAR
# ResNet-50 (32x32, 100 classes) 1.298 GMAC against ImageNet ResNet-50 (224x224) 4.089 GMAC.
FLOP_RATIO = {"resnet50": 1.298 / 4.089}
DISK_MB_S = 500.0  # assumed local SSD for checkpoint save/load on GPU hosts
GPU_START_S = 5.0  # assumed: Ray actor start, CUDA context, model build
CPU_START_S = 2.0  # assumed: Ray actor start, model build


def gavel_models(path: Path, measured: dict[str, dict[str, float]]
                 ) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    """Fit GPU device models from the single-GPU rows of a Gavel throughput CSV.

    Args:
        path: Gavel's physical-cluster throughput CSV.
        measured: per model, "mb" (checkpoint MB) and "params" of the CIFAR network, measured here.
    """
    single: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for row in csv.DictReader(path.open()):
        model = GAVEL_MODELS.get(row["model"])
        sps = float(row["steps_per_s"])
        # 0 = the cell failed (out of memory) in Gavel's data; multi-GPU rows are weak scaling
        if model is None or sps <= 0 or int(row["num_gpus"]) != 1:
            continue
        single[(model, row["gpu"])].append((int(row["batch_size"]), 1.0 / sps))
    models: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    samples: list[dict[str, Any]] = []
    for (model, gpu), pts in sorted(single.items()):
        pts.sort()
        fit = fit_step_time([b for b, _ in pts], [t for _, t in pts])
        beta = fit.beta_s_per_sample * FLOP_RATIO.get(model, 1.0)
        mb = measured[model]["mb"]
        eval_s = (TEST_SAMPLES / 512) * fit.alpha_s + TEST_SAMPLES * beta / 3.0
        models[model][gpu] = {
            "alpha_s": round(fit.alpha_s, 6), "beta_s_per_sample": round(beta, 8), "stem": "cifar",
            "eval_s": round(eval_s, 4), "checkpoint_mb": round(mb, 2),
            "save_s": round(mb / DISK_MB_S, 4), "load_s": round(mb / DISK_MB_S, 4),
            "start_overhead_s": GPU_START_S, "gradient_mb": round(4 * measured[model]["params"] / 1e6, 2),
            "r2": round(fit.r2, 4), "source": "fitted" if model in FLOP_RATIO else "published"}
        if model not in FLOP_RATIO:  # the ImageNet network's timings are not samples of this one
            samples.extend({"model": model, "device": gpu, "batch": b, "step_time_s": round(t, 6)} for b, t in pts)
    return models, samples


def cpu_models(timings: dict[str, Any]) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    """Fit CPU device models from probe timings keyed "model/threads/batch"."""
    by: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for key, v in timings.items():
        if key.startswith("_"):
            continue
        model, threads, batch = key.split("/")
        by[(model, int(threads))].append((int(batch), v))
    models: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    samples: list[dict[str, Any]] = []
    for model in sorted({m for m, _ in by}):
        two = sorted(by[(model, 2)])
        one = dict(by[(model, 1)])
        fit = fit_step_time([b for b, _ in two], [v["step"] for _, v in two])
        ps = [amdahl_parallel_fraction(v["step"], 2, one[b]["step"], 1) for b, v in two if b in one]
        largest = two[-1][1]
        eval_per_sample = largest["eval_s"] / 512
        base = {"alpha_s": round(fit.alpha_s, 6), "beta_s_per_sample": round(fit.beta_s_per_sample, 8), "stem": "cifar",
                "eval_s": round(eval_per_sample * TEST_SAMPLES, 3), "checkpoint_mb": round(largest["mb"], 2),
                "save_s": round(largest["save_s"], 4), "load_s": round(largest["load_s"], 4),
                "start_overhead_s": CPU_START_S, "gradient_mb": round(4 * largest["params"] / 1e6, 2),
                "reference_cores": 2,
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
        for n_threads in (1, 2):
            samples.extend({"model": model, "device": f"cpu@{n_threads}", "batch": b,
                            "step_time_s": round(v["step"], 6)} for b, v in sorted(by[(model, n_threads)]))
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
    timings = json.loads(args.cpu.read_text())
    measured = {m: timings[f"{m}/1/16"] for m in GAVEL_MODELS.values()}
    gpu, gpu_samples = gavel_models(args.gavel, measured)
    cpu, cpu_samples = cpu_models(timings)
    models = {m: {**gpu.get(m, {}), **cpu.get(m, {})} for m in sorted(set(gpu) | set(cpu))}
    host = timings.get("_host", {})
    data = {
        "provenance": {
            "network": "CIFAR ResNet (3x3 stem, no max pool), ResNet-18 with 10 classes, ResNet-50 with 100",
            "gpu_source": "published: Gavel (stanford-futuredata/gavel c4fa400), "
                          "scheduler/physical_cluster_throughputs.json, single-GPU rows; Narayanan et al., OSDI 2020; "
                          "MIT License. Gavel's ResNet-18 is the CIFAR network",
            "gpu_resnet50_rule": f"fitted: Gavel's ResNet-50 is ImageNet at 224x224; beta (per-sample cost) x "
                                 f"{FLOP_RATIO['resnet50']:.4f}, the ratio of multiply-accumulates per image "
                                 "(CIFAR ResNet-50 at 32x32 1.298 GMAC / ImageNet ResNet-50 at 224x224 4.089 GMAC); "
                                 "alpha (fixed per-step cost) kept",
            "gpu_scaling": "Gavel's multi-GPU rows are weak scaling and are not used; a k-GPU worker at a fixed "
                           "global batch is timed as alpha + beta B / k + ring all-reduce of gradient_mb over the "
                           "node's link_gbps (cluster file)",
            "gpu_caveats": "batch 512 is extrapolated from 16-256; eval_s, save_s, load_s and start_overhead_s of "
                           "GPUs are estimates (disk 500 MB/s, start 5 s, eval = forward ~ 1/3 of a training step "
                           "over 10,000 test images)",
            "cpu_source": f"measured by hetune.calibrate.cpu_timings: CIFAR ResNet, synthetic CIFAR-shaped batches, "
                          f"SGD momentum 0.9, torch threads 1 and 2, host {host.get('host', '?')}",
            "cpu_scaling": "step_time(cores) = step_time(reference_cores) * ((1 - p) + p * reference_cores / cores), "
                           "p = parallel_fraction fitted from the 1- and 2-thread timings (Amdahl's law)",
            "emulated": "cpu-fast and cpu-slow are this CPU at one core; cpu-slow is slowed 3x on purpose",
            "date": dt.date.today().isoformat(),
        },
        "models": models,
        "samples": gpu_samples + cpu_samples,
    }
    atomic_write_toml(args.out, data, header=(
        "Step-time models read by the simulator; built by `python -m hetune.calibrate.reference` (see its "
        "docstring).\nA calibration measured on your own hardware (`hetune calibrate`) always takes precedence "
        "over this file."))


if __name__ == "__main__":
    main()
