"""Does the simulator's 95% range hold the real runs once it knows how much this host's seconds vary?
(issue "Fidelity you can audit", item 3)

    python bench/bench_spread.py                       # about 30 s; writes results/fidelity/spread/
    hetune plots results/fidelity/spread --out plots/figures     # the figure of the judgements with spreads

Measures the spreads with ``hetune calibrate spread`` from what is not judged: the fidelity
benchmark's curve run (``under-load/runs/curves-s100``, Ray's own PBT, seed 100: chunk and overhead
spreads) and the host's two calibrations two hours apart (``under-load/calibration.toml`` and
``scaling-at-batch/calibration.toml``: drift). Then judges every committed under-load real run twice
with ``hetune compare --seeds 200``, under the under-load calibration as it is and under the same
calibration with the spreads, and reports per strategy how often the real makespan falls inside the
simulated 95% range, the range's width, and the median's error.

Wider ranges hold more runs by construction: the width is reported beside the coverage so that a
range that is merely wide is seen as such. The runs were made before the spreads were measured, and
the drift's second calibration was made after them; a benchmark that measures the spreads first is
item 5's.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIDELITY = REPO / "results/fidelity"


def hetune(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "hetune.cli", *args], capture_output=True, text=True, cwd=REPO)
    if out.returncode:
        sys.exit(f"hetune {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def judged(run: Path, work: Path, calibration: Path, seeds: int) -> dict:
    """fidelity.json of ``run`` (copied into ``work``) judged under ``calibration``."""
    copy = work / run.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("fidelity.json", "*-events.jsonl", "tune-output.log"))
    # named from the repository's root, so that no path of this host is written into fidelity.json
    hetune("compare", str(copy), "--seeds", str(seeds), "--set", f"calibration.path={calibration.relative_to(REPO)}")
    return json.loads((copy / "fidelity.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(FIDELITY / "spread"))
    ap.add_argument("--seeds", type=int, default=200)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = FIDELITY / "under-load/calibration.toml"
    spread_cal = out / "calibration-spread.toml"
    spread_cal.unlink(missing_ok=True)  # measured again every time (--force would keep the old one aside)
    report = hetune("calibrate", "spread", str(base), "--runs", str(FIDELITY / "under-load/runs/curves-s100"),
                    "--drift", str(FIDELITY / "scaling-at-batch/calibration.toml"), "--out", str(spread_cal))
    shutil.copy(base, out / "calibration-base.toml")
    runs = sorted(r for r in (FIDELITY / "under-load/runs").glob("*-s*")
                  if not r.name.startswith("curves-") and (r / "summary.json").is_file())
    rows, data = [], {}
    for name, cal in (("without spreads", out / "calibration-base.toml"), ("with spreads", spread_cal)):
        by: dict[str, list[dict]] = {}
        for run in runs:
            f = judged(run, out / "work" / name.replace(" ", "-"), cal, args.seeds)
            by.setdefault(run.name.rsplit("-s", 1)[0], []).append(f)
        data[name] = {}
        for strategy, fids in sorted(by.items()):
            mk = [f["sim_spread"]["makespan_s"] for f in fids]
            d = {"runs": len(fids), "within": sum(f["real_within_sim_spread"]["makespan"] for f in fids),
                 "width_pct": round(statistics.median(100 * (m["hi"] - m["lo"]) / m["median"] for m in mk), 1),
                 "median_error_pct": round(statistics.median(f["makespan_error_vs_median_pct"] for f in fids), 1)}
            data[name][strategy] = d
            rows.append(f"| {strategy} | {name} | {d['within']}/{d['runs']} | {d['width_pct']}% | "
                        f"{d['median_error_pct']:+.1f}% |")
        total = sum(d["within"] for d in data[name].values()), sum(d["runs"] for d in data[name].values())
        data[name]["all"] = {"within": total[0], "runs": total[1]}
        rows.append(f"| all | {name} | {total[0]}/{total[1]} | | |")
    # the judgements with spreads are kept for the figure (`hetune plots OUT`); the runs are under-load's
    for run in runs:
        keep = out / "runs" / run.name
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(out / "work" / "with-spreads" / run.name / "fidelity.json", keep / "fidelity.json")
    shutil.rmtree(out / "work", ignore_errors=True)
    text = (f"Measured on host {platform.node()!r}: {len(runs)} committed real runs (results/fidelity/under-load), "
            f"each judged over {args.seeds} simulated seeds.\n\nSpreads measured (hetune calibrate spread):\n\n"
            + "".join(f"    {line}\n" for line in report.strip().splitlines() if not line.startswith("wrote "))
            + "\n| strategy | calibration | real makespan within the simulated 95% range | range width "
              "(hi - lo) / median | error of the simulated median |\n|---|---|---:|---:|---:|\n"
            + "\n".join(rows) + "\n")
    (out / "table.md").write_text(text)
    (out / "table.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
