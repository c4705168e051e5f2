"""``hetune sweep --draws D``: the learning model's uncertainty carried into the choice of a strategy.

Each of D worlds fixes one draw of the learning model's parameters from its fit's joint uncertainty
(``learning.draw = d``: sim/skills.py ``draw_params``) and runs every strategy over the same S seeds
there (a sweep folder per world, ``draw-<d>/``). What a user reads: for each strategy, the share of the
D worlds in which its result over the S seeds ranks first (the sweep's objective and ranking,
sim/standings.py), with D, so that a ranking the fit cannot tell apart shows as split shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from hetune.sim.errors import ConfigError
from hetune.sim.loader import load_inputs
from hetune.sim.standings import ranking
from hetune.sim.sweep import Executor, run_sweep
from hetune.sim.tomlfile import atomic_write_json


def run_draws(experiment: str, overrides: list[str], strategies: list[str], seeds: Sequence[int], draws: int,
              out_dir: Path, executor: Executor, resume: bool = False, max_events: int | None = None,
              progress: Callable[[int, int], Any] | None = None) -> dict[str, Any]:
    """Run ``draws`` worlds of ``strategies`` x ``seeds`` and write ``draws.json`` (see the module docstring)."""
    inputs = load_inputs(experiment, overrides)
    learning = inputs.experiment.learning
    if not learning.uncertainty or not learning.draws:
        raise ConfigError(experiment, "learning.uncertainty", "--draws needs a learning model with a fit's "
                          "uncertainty (a learning file from hetune calibrate curves --kind skills) and draws on")
    info = inputs.experiment.experiment
    best: dict[str, int] = {s: 0 for s in strategies}
    worlds = []
    total = draws * len(strategies) * len(seeds)
    for d in range(draws):
        def world_progress(done: int, _total: int, d: int = d) -> None:
            if progress:
                progress(d * len(strategies) * len(seeds) + done, total)

        rows = run_sweep(experiment, overrides + [f"learning.draw={d}"], strategies, seeds, out_dir / f"draw-{d}",
                         executor, resume=resume, progress=world_progress, max_events=max_events)
        rank = ranking(rows, objective=info.objective, budget=info.budget_mode)
        first = rank[0]["strategy"] if rank else None
        if first is not None:
            best[first] += 1
        worlds.append({"draw": d, "best": first})
    shares = {s: best[s] / draws for s in strategies}
    result = {"experiment": info.name, "objective": info.objective, "draws": draws, "seeds": len(seeds),
              "share_best": shares, "worlds": worlds}
    atomic_write_json(out_dir / "draws.json", result)
    return result


def format_draws(result: dict[str, Any]) -> str:
    """The shares as a table, most often first."""
    lines = [f"share of {result['draws']} draws of the learning model (x {result['seeds']} seeds each) in which "
             f"each strategy ranks first by {result['objective']}"]
    for s, share in sorted(result["share_best"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{s:<26}{share:6.1%}")
    return "\n".join(lines)
