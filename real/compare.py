"""``hetune compare``: how far the simulator was from a real run of the same experiment and strategy.

The real run's folder holds the inputs it froze before it started (sim/snapshot.py: experiment,
strategy, seed, cluster, calibration with its curves, and their hashes); the simulator runs exactly
those, checked against their hashes (never the shipped files they came from), and both event logs
go through the same summary code. ``--set`` overrides judge the run under other inputs on purpose
(another calibration, say); fidelity.json records the hash of what it was judged with. Errors are
(simulated - real) / real.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from hetune.real.plain_divergence import run_plain_divergence
from hetune.real.provenance import calibration_note
from hetune.sim.engine import simulate
from hetune.sim.errors import ConfigError
from hetune.sim.events import read_events
from hetune.sim.snapshot import code_version, inputs_hash, load_snapshot, version_note
from hetune.sim.strategies import ray_native
from hetune.sim.replay import ReplayPopulation
from hetune.sim.results import prices
from hetune.sim.summary import summarize
from hetune.sim.events import dumps
from hetune.sim.tomlfile import atomic_write_json, atomic_write_text
from hetune.sim.view_log import VIEWS_FILE, read_view_log, replay


def seconds_per_iteration(events: list[dict[str, Any]]) -> dict[str, float]:
    """Mean chunk seconds per iteration (training + evaluation) per device type."""
    secs: dict[str, float] = defaultdict(float)
    its: dict[str, int] = defaultdict(int)
    for e in events:
        if e["kind"] == "chunk" and e.get("iterations"):
            secs[e["device"]] += float(e["duration_s"])
            its[e["device"]] += int(e["iterations"])
    return {d: secs[d] / its[d] for d in sorted(its) if its[d]}


def iteration_shares(events: list[dict[str, Any]]) -> dict[str, float]:
    """Share of all trained iterations per device type (where the strategy put the work)."""
    per: dict[str, float] = defaultdict(float)
    for e in events:
        if e["kind"] == "chunk":
            per[e["device"]] += e["iterations"]
    total = sum(per.values()) or 1.0
    return {d: round(v / total, 4) for d, v in sorted(per.items())}


def decision_counts(events: list[dict[str, Any]]) -> dict[str, int]:
    """Run and retire decisions, and restarts asked for, of a run's strategy."""
    runs = [e for e in events if e["kind"] == "decision" and e.get("action") == "run"]
    return {"run": len(runs), "retire": sum(e["kind"] == "decision" and e.get("action") == "retire" for e in events),
            "restart": sum(bool(e.get("restart")) for e in runs)}


def transfer_seconds(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean seconds of a checkpoint's upload to storage per save, and of its download (or node-to-node
    copy) per restore, with how many there were. Both engines put uploads on checkpoint events (a real
    run: from the end of the trainable's save to Tune reporting it, an upper bound), downloads as the
    copy_s of resume events (a real run: what the restore took beyond the trainable's load)."""
    ups = [float(e["upload_s"]) for e in events if e["kind"] == "checkpoint" and "upload_s" in e]
    downs = [float(e.get("copy_s") or 0.0) for e in events if e["kind"] == "resume"]
    return {"upload_s": round(float(np.mean(ups)), 4) if ups else None, "uploads": len(ups),
            "download_s": round(float(np.mean(downs)), 4) if downs else None, "downloads": len(downs)}


SPREAD_SEEDS = 200  # simulated seeds behind the predicted median and 95% range (`hetune compare --seeds`)
# The fewest seeds whose range means 95%: n draws' smallest and largest enclose a new draw with
# probability (n - 1) / (n + 1), which is 95% from n = 39 on; below that the "95% range" is wider
# than its draws can show. 200 puts the 2.5% and 97.5% points on about 5 draws each side.
MIN_SPREAD_SEEDS = 39


def _err(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or real == 0:
        return None
    return round(100.0 * (sim - real) / real, 2)


def compare(run_dir: Path, overrides: list[str] | None = None, seeds: int = SPREAD_SEEDS) -> dict[str, Any]:
    """Simulate the real run's config and write fidelity.json into ``run_dir``.

    Args:
        run_dir: a folder written by validate.
        overrides: ``--set`` strings, e.g. another calibration to judge.
        seeds: simulated seeds behind the predicted distribution (at least MIN_SPREAD_SEEDS).
    """
    if seeds < MIN_SPREAD_SEEDS:
        raise ConfigError("--seeds", "", f"must be >= {MIN_SPREAD_SEEDS} (fewer simulated runs cannot show a 95% "
                                         f"range), got {seeds}")
    # Judged with the run's own frozen inputs, never with the shipped files they came from.
    inputs, manifest = load_snapshot(run_dir, overrides)
    strategy, seed = inputs.experiment.strategy.name, inputs.experiment.experiment.seed
    real_events = read_events(run_dir / "events.jsonl")
    info = inputs.experiment.experiment
    target, budget = info.target_accuracy, (info.budget_s, info.budget_cost)
    real = summarize(real_events, target, prices(inputs), *budget)
    sim_events = simulate(inputs, inputs.make_strategy(strategy), seed).events
    sim = summarize(sim_events, target, prices(inputs), *budget)
    # Replay: the real population's accuracies and decisions, re-timed by the simulator, so the
    # error left is timing alone; the plain simulation adds population-dynamics error.
    replay_events = simulate(inputs, inputs.make_strategy(strategy), seed,
                             ReplayPopulation(real_events, str(run_dir))).events
    replay = summarize(replay_events, target, prices(inputs), *budget)
    real_spi, sim_spi = seconds_per_iteration(real_events), seconds_per_iteration(sim_events)
    ran_on = _run_host(run_dir)
    if not real_spi:
        raise ConfigError(str(run_dir / "events.jsonl"), "", "no chunk events: the real run did not train")
    out = {
        "strategy": strategy, "seed": seed, "calibration": _shown(inputs.experiment.calibration.path, run_dir),
        # what the accuracy range rests on: a learning model fitted with its uncertainty, or not
        "learning": {"kind": inputs.experiment.learning.kind,
                     "fitted_uncertainty": bool(inputs.experiment.learning.uncertainty
                                                and inputs.experiment.learning.draws)},
        # what the run was judged with: its snapshot (sim/snapshot.py), or that and --set overrides
        "inputs": {"inputs_hash": inputs_hash(inputs), "frozen_hash": manifest["inputs_hash"],
                   "overrides": list(overrides or []), "code_version": manifest.get("code_version"),
                   "judged_by": code_version(), "version_note": version_note(manifest)},
        "makespan_s": {"real": real["makespan_s"], "sim": sim["makespan_s"]},
        "makespan_error_pct": _err(sim["makespan_s"], real["makespan_s"]),
        "time_to_target_s": {"real": real["time_to_target_s"], "sim": sim["time_to_target_s"]},
        "time_to_target_error_pct": _err(sim["time_to_target_s"], real["time_to_target_s"]),
        "seconds_per_iteration": {d: {"real": round(real_spi[d], 6), "sim": round(sim_spi.get(d, 0.0), 6)}
                                  for d in real_spi},
        "step_time_error_pct": {d: _err(sim_spi.get(d), real_spi[d]) for d in real_spi},
        "exploits": {"real": real["exploits"], "sim": sim["exploits"], "replay": replay["exploits"]},
        "replay_makespan_s": replay["makespan_s"],
        "replay_makespan_error_pct": _err(replay["makespan_s"], real["makespan_s"]),
        "replay_time_to_target_error_pct": _err(replay["time_to_target_s"], real["time_to_target_s"]),
        "best_accuracy": {"real": real["best_accuracy"], "sim": sim["best_accuracy"]},
        "best_accuracy_at_budget": {"real": real["best_accuracy_at_budget"], "sim": sim["best_accuracy_at_budget"]},
        # Do the engines decide alike? Where the iterations ran, and what the strategy answered.
        "iteration_share": {d: {"real": v, "sim": iteration_shares(sim_events).get(d, 0.0)}
                            for d, v in iteration_shares(real_events).items()},
        "decisions": {"real": decision_counts(real_events), "sim": decision_counts(sim_events)},
        "checkpoint_transfers": {"real": transfer_seconds(real_events), "sim": transfer_seconds(sim_events),
                                 "storage": getattr(inputs.calibration.storage, "kind", None)},
        # None when the calibration was measured where the run ran; else why the errors above may not hold
        "calibration_note": calibration_note(inputs.calibration.provenance,
                                             _shown(inputs.experiment.calibration.path, run_dir), ran_on),
    }
    if (run_dir / VIEWS_FILE).is_file():  # not for --plain runs (Ray's own PBT asks no strategy)
        out["strategy_replay"] = _strategy_replay(run_dir / VIEWS_FILE, inputs, strategy)
        out["decision_divergence"] = _divergence(run_dir, overrides)
    elif strategy == ray_native():  # a --plain run: where Tune's own placements part (Ray's nodes an input)
        out["decision_divergence"] = run_plain_divergence(run_dir, overrides)
    out.update(_spread(inputs, strategy, real, seeds))
    if inputs.experiment.faults.enabled or real["failures"]:
        out["faults"] = _fault_part(inputs, strategy, seed, real, sim)
    # The simulated logs go beside the real one, so the fidelity figure reads files only.
    atomic_write_text(run_dir / "sim-events.jsonl", dumps(sim_events))
    atomic_write_text(run_dir / "replay-events.jsonl", dumps(replay_events))
    atomic_write_json(run_dir / "fidelity.json", out)
    return out


def _spread(inputs: Any, strategy: str, real: dict[str, Any], seeds: int = SPREAD_SEEDS) -> dict[str, Any]:
    """The simulator's prediction as a distribution: the same experiment over ``seeds`` seeds.

    The real run's seed does not give the simulated population the real one's learning curves (the
    surrogate draws its own), so one simulated seed against one real run carries both runs' PBT
    luck; the median over seeds is the prediction a user would plan with, and the 2.5-97.5%
    range says whether the real run is one the simulator considers possible. Every seed's value
    is kept (``values``) for the fidelity benchmark's figure.
    """
    info = inputs.experiment.experiment
    runs = [summarize(simulate(inputs, inputs.make_strategy(strategy), s).events, info.target_accuracy,
                      prices(inputs), info.budget_s, info.budget_cost) for s in range(seeds)]

    def dist(key: str) -> dict[str, Any]:
        vals = [r[key] for r in runs if r[key] is not None]
        if not vals:
            return {"median": None, "lo": None, "hi": None, "runs": 0, "values": []}
        lo, med, hi = np.percentile(vals, [2.5, 50, 97.5])
        return {"median": round(float(med), 3), "lo": round(float(lo), 3), "hi": round(float(hi), 3),
                "runs": len(vals), "values": [round(float(v), 3) for v in vals]}

    # the best accuracy at the experiment's budget; with no budget set, at the end of the run
    best_key = "best_accuracy_at_budget" if info.budget_s or info.budget_cost else "best_accuracy"
    mk, ttt, best = dist("makespan_s"), dist("time_to_target_s"), {**dist(best_key), "key": best_key}

    def within(d: dict[str, Any], value: float | None) -> bool:
        if value is None:  # the real run never reached the target: possible if some simulated run did not
            return d["runs"] < seeds
        return d["runs"] > 0 and d["lo"] <= value <= d["hi"]

    return {"sim_spread": {"seeds": seeds, "makespan_s": mk, "time_to_target_s": ttt, "best_accuracy": best},
            "makespan_error_vs_median_pct": _err(mk["median"], real["makespan_s"]),
            "time_to_target_error_vs_median_pct": _err(ttt["median"], real["time_to_target_s"]),
            "real_within_sim_spread": {"makespan": within(mk, real["makespan_s"]),
                                       "time_to_target": within(ttt, real["time_to_target_s"]),
                                       "best_accuracy": within(best, real[best_key])}}


def _fault_part(inputs: Any, strategy: str, seed: int, real: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    """Failures and lost work in both engines, and how much of the predicted makespan the
    experiment's ``[faults]`` account for (the same run simulated without them)."""
    import dataclasses

    from hetune.sim.faults import FaultsConfig

    calm_inputs = dataclasses.replace(inputs, experiment=dataclasses.replace(inputs.experiment, faults=FaultsConfig()))
    calm = simulate(calm_inputs, calm_inputs.make_strategy(strategy), seed).events
    calm_makespan = summarize(calm, inputs.experiment.experiment.target_accuracy, prices(inputs))["makespan_s"]
    return {"failures": {"real": real["failures"], "sim": sim["failures"]},
            "lost_iterations": {"real": real["lost_iterations"], "sim": sim["lost_iterations"]},
            "sim_makespan_without_faults_s": calm_makespan,
            "faults_add_s": round(sim["makespan_s"] - calm_makespan, 6),
            "makespan_error_pct_without_faults": _err(calm_makespan, real["makespan_s"])}


def _divergence(run_dir: Path, overrides: list[str] | None) -> dict[str, Any]:
    """Where the replay's decisions part from the run's (real/divergence.py), with the run's own
    seconds and, under ``calibration_seconds``, with the calibration's; its view logs are scratch."""
    import tempfile

    from hetune.real.divergence import run_divergence

    with tempfile.TemporaryDirectory(prefix="hetune-divergence-") as tmp:
        got = run_divergence(run_dir, Path(tmp) / "replay-views.jsonl", overrides)
        cal = run_divergence(run_dir, Path(tmp) / "replay-views-cal.jsonl", overrides, run_seconds=False)
    got["calibration_seconds"] = {k: cal[k] for k in ("agreed", "divergence")}
    return got


def _strategy_replay(path: Path, inputs: Any, strategy: str) -> dict[str, Any]:
    """A fresh object of the run's strategy asked again with every view the real run recorded
    (sim/view_log.py): how many of its answers are those it gave in the run."""
    try:
        header, records = read_view_log(path)
        if header.get("strategy") != strategy:
            raise ValueError(f"line 1: a log of strategy {header.get('strategy')!r}, the run's is {strategy!r}")
        r = replay(inputs.make_strategy(strategy), records, str(header["mode"]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:  # a damaged log: say where, never a traceback
        raise ConfigError(str(path), "", str(exc) if isinstance(exc, ValueError) else f"broken record ({exc!r})")
    return {"asked": r.asked, "matched": r.matched,
            "first_mismatch": None if r.first_mismatch is None else {
                "line": r.first_mismatch[0], "recorded": r.first_mismatch[1], "now": r.first_mismatch[2]}}


def trust_line(learning: dict[str, Any] | None) -> str:
    """How far the simulated accuracy range can be trusted, in the terms it was measured in."""
    if learning and learning.get("fitted_uncertainty"):
        return ("how far to trust the accuracy range: the learning model is fitted to real runs and each simulated "
                "seed draws from the fit's uncertainty; measured against real PBT runs in results/pbt-accuracy/, "
                "its limits in docs/learning.md ('How far to trust it')")
    kind = (learning or {}).get("kind", "the experiment's")
    return (f"how far to trust the accuracy range: the learning model ({kind}) carries no fitted uncertainty, so the "
            "range is its reading noise only, not what it does not know (docs/learning.md, 'How far to trust it')")


def _shown(path: str, run_dir: Path) -> str:
    """A path as the record shows it: relative to the run folder when inside it, else to the working
    directory where it lies below it (no build-host path either way)."""
    for base in (run_dir.resolve(), Path.cwd().resolve()):
        try:
            return str(Path(path).resolve().relative_to(base))
        except ValueError:
            continue
    return path


def _run_host(run_dir: Path) -> dict[str, str] | None:
    """The host and versions a validate run recorded in its summary (None for older runs: this host)."""
    try:
        host = json.loads((run_dir / "summary.json").read_text()).get("host")
    except (OSError, ValueError):
        return None
    return host if isinstance(host, dict) and isinstance(host.get("host"), str) else None


def format_fidelity(f: dict[str, Any]) -> str:
    """Fidelity as readable lines."""
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:+.1f}%"
    lines = [f"strategy {f['strategy']}, seed {f['seed']}"]
    if "inputs" in f:
        x = f["inputs"]
        lines.append(f"judged with the run's frozen inputs (inputs hash {x['frozen_hash'][:12]})" if not x["overrides"]
                     else f"judged with the run's frozen inputs and --set {' '.join(x['overrides'])} "
                          f"(inputs hash {x['inputs_hash'][:12]}; frozen {x['frozen_hash'][:12]})")
        if x.get("version_note"):
            lines.append(f"note: {x['version_note']}")
    lines += [

             f"makespan: real {f['makespan_s']['real']:,.1f} s, sim {f['makespan_s']['sim']:,.1f} s, "
             f"error {pct(f['makespan_error_pct'])}",
             f"time to target: real {f['time_to_target_s']['real']}, sim {f['time_to_target_s']['sim']}, "
             f"error {pct(f['time_to_target_error_pct'])}"]
    for d, v in f["seconds_per_iteration"].items():
        lines.append(f"seconds per iteration on {d}: real {v['real']:.4f}, sim {v['sim']:.4f}, "
                     f"error {pct(f['step_time_error_pct'][d])}")
    lines.append(f"replay of the real population (timing error only): makespan {f['replay_makespan_s']:,.1f} s, "
                 f"error {pct(f['replay_makespan_error_pct'])}; time to target error "
                 f"{pct(f['replay_time_to_target_error_pct'])}")
    if "sim_spread" in f:
        sp, w = f["sim_spread"], f["real_within_sim_spread"]
        for key, label in (("makespan_s", "makespan"), ("time_to_target_s", "time_to_target")):
            d = sp[key]
            rng = "never reached" if d["median"] is None else (
                f"median {d['median']:,.1f} s ({d['lo']:,.1f}-{d['hi']:,.1f})"
                + (f", reached in {d['runs']} of {sp['seeds']}" if label == "time_to_target" else ""))
            err = f["makespan_error_vs_median_pct"] if label == "makespan" else f["time_to_target_error_vs_median_pct"]
            lines.append(f"{label.replace('_', ' ')} over {sp['seeds']} simulated seeds: {rng}; error of the median "
                         f"{pct(err)}; real run {'within' if w[label] else 'OUTSIDE'} the simulated 95% range")
        best = sp.get("best_accuracy")  # fidelity.json files before it have none
        if best and best["median"] is not None:
            real_best = f[best["key"]]["real"]
            where = "at the budget" if best["key"] != "best_accuracy" else "of the run"
            lines.append(f"best accuracy {where} over {sp['seeds']} simulated seeds: median {best['median']:.3f} "
                         f"({best['lo']:.3f}-{best['hi']:.3f}), real {real_best}; real run "
                         f"{'within' if w['best_accuracy'] else 'OUTSIDE'} the simulated 95% range")
            lines.append(trust_line(f.get("learning")))
    lines.append(f"exploits: real {f['exploits']['real']}, sim {f['exploits']['sim']}, "
                 f"replay {f['exploits']['replay']}")
    for d, v in f.get("iteration_share", {}).items():
        lines.append(f"share of iterations on {d}: real {v['real']:.0%}, sim {v['sim']:.0%}")
    if "decisions" in f:
        dr, ds = f["decisions"]["real"], f["decisions"]["sim"]
        lines.append(f"decisions: real {dr['run']} run / {dr['retire']} retire, "
                     f"sim {ds['run']} run / {ds['retire']} retire")
    if f.get("decision_divergence"):
        dd = f["decision_divergence"]
        d = dd["divergence"]
        def said(worker: int, decision: Any) -> str:
            if decision == "retire":
                return f"worker {worker}: retire"
            verb = "restart" if decision.get("restart") else "run"
            span = f" for {decision['iterations']}" if "iterations" in decision else ""  # a plain run's: none
            return f"worker {worker}: {verb} trial {decision['run']}{span}"
        parted = "" if d is None else (f", then parted (real {said(*d['real'])}; replay {said(*d['sim'])}); "
                                       f"cause: {d['cause']}")
        cal = dd.get("calibration_seconds")
        also = "" if cal is None else (f"; with the calibration's seconds {cal['agreed']}"
                                       + (f" ({cal['divergence']['cause']})" if cal["divergence"] else ""))
        whose = " with the run's seconds" if cal else ""  # fidelity.json files before that replay lack it
        what = "placing decisions"
        if dd.get("placement") == "run":  # a --plain run: Tune's own placements, Ray's nodes given
            whose, what = " with the run's seconds and Ray's nodes", "starts"
        lines.append(f"decisions of the replay{whose}: "
                     f"{dd['agreed']} of {dd['placing']['real']} {what} as in the run{parted}{also}")
    if "checkpoint_transfers" in f:
        x = f["checkpoint_transfers"]
        r, m = x["real"], x["sim"]

        def sec(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f} s"
        lines.append(f"checkpoint transfers ({x['storage'] or 'no storage model: node-to-node copies'}): upload per "
                     f"save real {sec(r['upload_s'])} ({r['uploads']}), sim {sec(m['upload_s'])} ({m['uploads']}); "
                     f"download per restore real {sec(r['download_s'])} ({r['downloads']}), "
                     f"sim {sec(m['download_s'])} ({m['downloads']})")
    if "strategy_replay" in f:
        r = f["strategy_replay"]
        lines.append(f"strategy replay: {r['matched']} of {r['asked']} questions answered as in the run by a fresh "
                     f"strategy object shown the recorded views"
                     + ("" if r["first_mismatch"] is None else
                        f"; the first that differs: views.jsonl line {r['first_mismatch']['line']}, recorded "
                        f"{r['first_mismatch']['recorded']}, now {r['first_mismatch']['now']}"))
    if "faults" in f:
        x = f["faults"]
        lines.append(f"faults: failures real {x['failures']['real']}, sim {x['failures']['sim']}; lost iterations "
                     f"real {x['lost_iterations']['real']}, sim {x['lost_iterations']['sim']}; they add "
                     f"{x['faults_add_s']:+,.1f} s to the simulated makespan (its error without them "
                     f"{pct(x['makespan_error_pct_without_faults'])})")
    if f.get("calibration_note"):
        lines.append(f"note: {f['calibration_note']}")
    return "\n".join(lines)
