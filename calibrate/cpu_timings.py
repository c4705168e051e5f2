"""Probe the CPU rows of configs/calibration/reference.toml on this host.

    python -m hetune.calibrate.cpu_timings --out configs/calibration/cpu-timings.json

Every (model, threads, batch) cell is timed with ``probe`` (CIFAR stem,
synthetic CIFAR-shaped batches, SGD momentum 0.9) and written as
"model/threads/batch" -> {step, eval_s, save_s, load_s, mb, params}, the
input of ``hetune.calibrate.reference --cpu``. Cells run one at a time, so
no two share the cores.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Any

from hetune.calibrate.probe import probe
from hetune.sim.tomlfile import atomic_write_text

CLASSES = {"resnet18": 10, "resnet50": 100}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="resnet18,resnet50")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch-sizes", default="16,32,64,128")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, dict[str, Any]] = {}
    for model in args.models.split(","):
        for threads in map(int, args.threads.split(",")):
            for batch in map(int, args.batch_sizes.split(",")):
                r = probe(model, CLASSES[model], batch, args.steps, warmup=1, threads=threads, stem="cifar",
                          eval_samples=512)
                times = sorted(r["step_times_s"])
                out[f"{model}/{threads}/{batch}"] = {
                    "step": times[len(times) // 2], "eval_s": r["eval_s"], "save_s": r["save_s"],
                    "load_s": r["load_s"], "mb": r["checkpoint_mb"], "params": r["params"]}
                print(model, threads, batch, round(times[len(times) // 2], 4), flush=True)
    out["_host"] = {"host": platform.node(), "processor": platform.processor() or platform.machine()}
    atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
