"""Checkpoints through an S3-compatible store, real against simulated (issue "Fidelity you can audit", item 4).

    python bench/bench_storage.py                      # tune-default (Ray's own PBT) and hrfs, about 10 min
    python bench/bench_storage.py --strategies hrfs --out /tmp/storage

Starts moto's S3 server on loopback, calibrates this host with it (``hetune calibrate --under-load
--storage``: step times while the other slot trains, as the fidelity benchmark does, trial overheads,
and the storage, calibrate/storage.py), then runs the smoke experiment
for real (4 trials of the CIFAR ResNet-18 at batch 8 on the digits, 40 iterations, the emulated
local cluster) with that server as Tune's ``storage_path``: every save goes up to it and every restore
comes down from it. ``hetune compare`` judges each run with its frozen inputs; the table sets the
measured seconds per upload and per download against the simulator's, and the makespan error with
the storage model against the error of the same prediction without it (the older model: no upload,
a node-to-node copy only where a trial changes node).

The server is in-process Python on this 2-core host, sharing it with the trials: its bandwidth is
this host's, not a cloud store's. Results: ``OUT/table.md``, ``OUT/runs/<strategy>/`` (run folders
with their frozen inputs and fidelity.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "configs/experiments/smoke-local.toml"


def _server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(150):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    import boto3

    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}").create_bucket(Bucket="hetune")
    return proc, f"s3://hetune/runs?endpoint_override=127.0.0.1:{port}&scheme=http"


def _without_storage_makespan(run: Path) -> float:
    """The simulator's makespan for the run under its frozen inputs, the storage model taken out."""
    from hetune.sim.engine import simulate
    from hetune.sim.results import prices
    from hetune.sim.snapshot import load_snapshot
    from hetune.sim.summary import summarize

    inputs, _ = load_snapshot(run)
    inputs = dataclasses.replace(inputs, calibration=dataclasses.replace(inputs.calibration, storage=None))
    events = simulate(inputs, inputs.make_strategy(inputs.experiment.strategy.name), inputs.experiment.experiment.seed)
    return float(summarize(events.events, 1.0, prices(inputs))["makespan_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", default="tune-default,hrfs")
    ap.add_argument("--out", default=str(REPO / "results/storage"))
    a = ap.parse_args(argv)
    from hetune.cli import main as hetune

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, uri = _server()
    rows, t0 = [], time.perf_counter()
    try:
        # calibrated here, before the judged runs, with the storage they will use
        cal = out / "calibration-s3.toml"
        if hetune(["calibrate", "--cluster", str(REPO / "configs/clusters/local.toml"), "--models", "resnet18",
                   "--batch-sizes", "4,8,16", "--steps", "10", "--under-load", "--storage", uri, "--out", str(cal),
                   "--force", "--quiet"]) != 0:
            print("bench_storage: calibrate failed", file=sys.stderr)
            return 1
        calib = tomllib.loads(cal.read_text())
        for strategy in [s for s in a.strategies.split(",") if s]:
            run = out / "runs" / strategy
            shutil.rmtree(run, ignore_errors=True)
            plain = ["--plain"] if strategy == "tune-default" else []
            code = hetune(["validate", str(SMOKE), "--strategy", strategy, *plain, "--out", str(run), "--quiet",
                           "--set", f'real.storage_path="{uri}"',
                           "--set", f'calibration.path="{cal}"'])
            if code != 0 or hetune(["compare", str(run)]) != 0:
                print(f"bench_storage: {strategy} failed (exit {code})", file=sys.stderr)
                return 1
            fid = json.loads((run / "fidelity.json").read_text())
            real_s = fid["makespan_s"]["real"]
            rows.append({"strategy": strategy + (" (--plain)" if plain else ""), **fid["checkpoint_transfers"],
                         "makespan_real_s": real_s, "makespan_sim_s": fid["makespan_s"]["sim"],
                         "makespan_error_pct": fid["makespan_error_pct"],
                         "makespan_error_without_storage_pct": round(
                             100 * (_without_storage_makespan(run) - real_s) / real_s, 2)})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    meta = {"host": platform.node(), "seconds": round(time.perf_counter() - t0), "storage": calib["storage"],
            "command": "python bench/bench_storage.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    (out / "table.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (out / "table.md").write_text(_table(rows, meta))
    print(_table(rows, meta))
    return 0


def _table(rows: list[dict], meta: dict) -> str:
    def sec(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"
    st = meta["storage"]
    lines = [f"Host {meta['host']}, {meta['seconds']} s. Storage measured: upload {st['upload_mb_s']:.1f} MB/s, "
             f"download {st['download_mb_s']:.1f} MB/s, {st['request_s']:.3f} s per request.", "",
             "| strategy | upload s per save: real (n) | sim (n) | download s per restore: real (n) | sim (n) "
             "| makespan real s | sim s | error | error without the storage model |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        re_, si = r["real"], r["sim"]
        lines.append(f"| {r['strategy']} | {sec(re_['upload_s'])} ({re_['uploads']}) | {sec(si['upload_s'])} "
                     f"({si['uploads']}) | {sec(re_['download_s'])} ({re_['downloads']}) | {sec(si['download_s'])} "
                     f"({si['downloads']}) | {r['makespan_real_s']:.1f} | {r['makespan_sim_s']:.1f} | "
                     f"{r['makespan_error_pct']:+.1f}% | {r['makespan_error_without_storage_pct']:+.1f}% |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
