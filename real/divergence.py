"""Where the simulator's decisions part from a real run's, and why (issue "Fidelity you can audit",
item 2b).

The simulator replays the real run (sim/replay.py's ReplayPopulation: the run's own readings, its
exploits with Ray's drawn donors and explored configs, its failures; by default the run's own
seconds too, sim/recorded_seconds.py, so that a step time or overhead the calibration got wrong
cannot be why they part, else the calibration's) with a view log, so both engines' questions to the
strategy are on record with what the strategy saw (sim/view_log.py). The two logs' placing
decisions (run a trial, retire a worker; an "idle" answer places nothing, and Tune polls idle slots
at every scheduling step where the simulator asks once per event) are walked in order to the first
pair that differs. The two views that produced that pair are then compared, and the divergence is
named by what differs, the first of CAUSES that applies:

- ``another worker asked``: the views agree but a different worker asked (Tune asks for idle slots
  at its own scheduling steps, in its own order);
- ``a trial still starting``: a trial's process is up in one engine, not yet in the other;
- ``a trial still saving or running``: a trial's status differs (one engine has its chunk or its
  save still under way);
- ``a trial further along``: a trial's iteration differs (chunks ended at other times: the step
  times differ);
- ``a reading seen in one engine only``: a trial's accuracy differs (results arrive in another
  order);
- ``a perturbation point``: only whether a trial is at its perturbation point differs;
- ``a worker's state``: a worker's resident trial, idle or retired flag differs;
- ``unexplained``: the views are the same and the answers are not, or only what none of the above
  names differs. A strategy that decides from what it is shown has none (the strict replay).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

CAUSES = ("another worker asked", "a trial still starting", "a trial still saving or running",
          "a trial further along", "a reading seen in one engine only", "a perturbation point",
          "a worker's state", "unexplained")


@dataclass
class Divergence:
    """The first placing decision on which the engines part.

    Attributes:
        index: how many placing decisions agreed before it.
        real, sim: the two decisions, each (worker, encoded decision).
        cause: the first of CAUSES that applies.
        differences: every cause that applies, and per cause the trials or workers concerned.
    """

    index: int
    real: tuple[int, Any]
    sim: tuple[int, Any]
    cause: str
    differences: dict[str, list[int]]


def placing(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The questions whose answer placed something (a run or a retire), in order."""
    return [r for r in records if r.get("kind") == "assign" and r.get("decision") != "idle"]


def _by_id(items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(x["id"]): x for x in items}


def differences(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, list[int]]:
    """Per cause, the trials (or workers, for a worker's state) on which two views differ."""
    out: dict[str, list[int]] = {}
    if sorted(real["view"]["starting"]) != sorted(sim["view"]["starting"]):
        out["a trial still starting"] = sorted(set(real["view"]["starting"]) ^ set(sim["view"]["starting"]))
    rt, st = _by_id(real["view"]["trials"]), _by_id(sim["view"]["trials"])
    for cause, key in (("a trial still saving or running", "status"), ("a trial further along", "iteration"),
                       ("a reading seen in one engine only", "accuracy"), ("a perturbation point", "at_point")):
        ids = sorted(i for i in rt.keys() & st.keys() if rt[i][key] != st[i][key])
        if ids:
            out[cause] = ids
    rw, sw = _by_id(real["view"]["workers"]), _by_id(sim["view"]["workers"])
    ids = sorted(i for i in rw.keys() & sw.keys()
                 if any(rw[i][k] != sw[i][k] for k in ("resident", "idle", "retired")))
    if ids:
        out["a worker's state"] = ids
    if real["worker"] != sim["worker"]:
        out["another worker asked"] = sorted({real["worker"], sim["worker"]})
    return out


def first_divergence(real_records: Sequence[dict[str, Any]],
                     sim_records: Sequence[dict[str, Any]]) -> Divergence | None:
    """The first placing decision on which two view logs' records part; None if one log's placing
    decisions are the other's from start to end (the shorter one is a prefix of the longer)."""
    real, sim = placing(real_records), placing(sim_records)
    for i, (r, s) in enumerate(zip(real, sim)):
        if r["worker"] == s["worker"] and r["decision"] == s["decision"]:
            continue
        diff = differences(r, s)
        return Divergence(i, (r["worker"], r["decision"]), (s["worker"], s["decision"]), cause_of(diff), diff)
    return None


def cause_of(diff: dict[str, list[int]]) -> str:
    """The cause named for a divergence with these differences: another worker only when nothing
    else differs, else the first of CAUSES that applies, else unexplained."""
    if "another worker asked" in diff and len(diff) == 1:
        return "another worker asked"
    return next((c for c in CAUSES[1:-1] if c in diff), "unexplained")


def replay_run(run_dir: Path, inputs: Any, strategy: Any, events: list[dict[str, Any]], run_seconds: bool = True,
               view_log: Any = None) -> list[dict[str, Any]]:
    """The simulator's replay of the recorded run in ``run_dir`` (its readings, exploits, draws and
    failures; its own seconds with ``run_seconds``) under ``strategy``: the replay's events."""
    from hetune.sim.engine import simulate
    from hetune.sim.recorded_seconds import RecordedSeconds
    from hetune.sim.replay import ReplayPopulation

    seed = inputs.experiment.experiment.seed
    return simulate(inputs, strategy, seed, ReplayPopulation(events, str(run_dir)), view_log=view_log,
                    seconds=RecordedSeconds(events) if run_seconds else None).events


def run_divergence(run_dir: Path, out: Path | None = None, overrides: list[str] | None = None,
                   run_seconds: bool = True) -> dict[str, Any]:
    """Replay the real run in ``run_dir`` in the simulator with a view log (written to ``out``, by
    default the run folder's ``replay-views.jsonl``) and find the first divergence of decisions.

    With ``run_seconds`` the replay takes the run's own seconds where it does what the run did
    (sim/recorded_seconds.py), else the calibration's.

    Returns a dict: the run's strategy and seed, whose seconds, placing decisions in each engine, how
    many agreed before the first divergence, and the divergence (None: none) with its cause and differences.
    """
    from hetune.sim.errors import ConfigError
    from hetune.sim.events import read_events
    from hetune.sim.snapshot import load_snapshot
    from hetune.sim.view_log import VIEWS_FILE, ViewLog, read_view_log

    if not (run_dir / VIEWS_FILE).is_file():
        raise ConfigError(str(run_dir / VIEWS_FILE), "", "no view log (a --plain run asks no strategy, and runs "
                                                         "recorded before view logs have none)")
    inputs, _ = load_snapshot(run_dir, overrides)
    strategy, seed = inputs.experiment.strategy.name, inputs.experiment.experiment.seed
    try:
        header, real_records = read_view_log(run_dir / VIEWS_FILE)
    except ValueError as exc:
        raise ConfigError(str(run_dir / VIEWS_FILE), "", str(exc)) from None
    sim_path = out or run_dir / "replay-views.jsonl"
    log = ViewLog(sim_path, strategy, str(header.get("mode", inputs.experiment.pbt.mode)), "sim")
    replay_run(run_dir, inputs, inputs.make_strategy(strategy), read_events(run_dir / "events.jsonl"), run_seconds,
               log)
    log.flush()
    _, sim_records = read_view_log(sim_path)
    d = first_divergence(real_records, sim_records)
    return {"strategy": strategy, "seed": seed, "seconds": "run" if run_seconds else "calibration",
            "placing": {"real": len(placing(real_records)), "sim": len(placing(sim_records))},
            "agreed": d.index if d else min(len(placing(real_records)), len(placing(sim_records))),
            "divergence": None if d is None else {"real": list(d.real), "sim": list(d.sim), "cause": d.cause,
                                                  "differences": d.differences}}
