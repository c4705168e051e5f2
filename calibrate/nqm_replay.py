"""The noisy quadratic model replayed over recorded trial histories, and the residual statistics of a fit.

``predict`` gives, for one parameter set, the expected accuracy and relative excess loss at every
reading (calibrate/histories.py): each trial from a fresh network or from its donor's checkpoint,
exactly, with no luck. ``reading_spread`` and ``noise_estimates`` measure what the fitted model
leaves: the reading-to-reading noise (consecutive readings of one trial differ by it twice over, a
slow misfit cancels) and the seed spread (what remains of the spread of per-trial mean residuals).
"""

from __future__ import annotations

import math

import numpy as np

from hetune.calibrate.histories import History, Reading
from hetune.sim.nqm import NQM, NQMParams, NQMState


def predict(histories: list[History], params: NQMParams, eval_samples: int
            ) -> list[tuple[Reading, float, float]]:
    """(reading, expected accuracy, relative excess loss) for every reading, in the histories' order.

    A segment starts from a fresh network or from its donor's state at the exploited iteration (the
    donor's reading there, or advanced to it from the reading before at the next reading's config).
    """
    models: dict[int, NQM] = {}
    ends: dict[tuple[str, int], list[tuple[int, NQMState]]] = {}
    by_key = {h.key: h for h in histories}
    out: list[tuple[Reading, float, float]] = []
    done: set[str] = set()

    def model(batch: int) -> NQM:
        if batch not in models:
            models[batch] = NQM(params, batch, eval_samples)
        return models[batch]

    def state_at(key: str, seg: int, iteration: int) -> NQMState:
        if (key, seg) not in ends:
            run(by_key[key])
        points = ends[(key, seg)]
        before = [p for p in points if p[0] <= iteration]
        it, st = before[-1] if before else points[0]
        if it < iteration:
            nxt = next((r for r in _segment_readings(by_key[key], seg) if r.iteration > it), None)
            if nxt is not None:
                st = model(by_key[key].batch).advance(st, {"lr": nxt.lr, "momentum": nxt.momentum}, iteration - it)
        return st

    def run(h: History) -> None:
        if h.key in done:
            return
        done.add(h.key)
        m = model(h.batch)
        for i, seg in enumerate(h.segments):
            if seg.origin is None or seg.origin.donor not in by_key:
                st, it = NQMState(m._start, 0.0), 0
            else:
                st, it = state_at(seg.origin.donor, seg.origin.segment, seg.origin.iteration), seg.start
            points = [(it, st)]
            for r in seg.readings:
                st = m.advance(st, {"lr": r.lr, "momentum": r.momentum}, max(0, r.iteration - it))
                it = r.iteration
                points.append((it, st))
            ends[(h.key, i)] = points

    with np.errstate(over="ignore", invalid="ignore"):  # far-out parameters diverge: the model marks them so
        for h in histories:
            run(h)
    for h in histories:
        m = model(h.batch)
        for i, seg in enumerate(h.segments):
            for r, (_, st) in zip(seg.readings, ends[(h.key, i)][1:]):
                out.append((r, m.accuracy(st), m.relative_loss(st)))
    return out


def _segment_readings(h: History, seg: int) -> list[Reading]:
    return h.segments[seg].readings


def _residuals_by_trial(histories: list[History], nqm: NQMParams, eval_samples: int
                        ) -> dict[str, list[tuple[float, float]]]:
    """(observed - expected accuracy, expected accuracy) per reading, per trial."""
    pred = predict(histories, nqm, eval_samples)
    res: dict[str, list[tuple[float, float]]] = {}
    i = 0
    for h in histories:
        for r in h.readings():
            if r.accuracy is not None:
                res.setdefault(h.key, []).append((r.accuracy - pred[i][1], pred[i][1]))
            i += 1
    return res


def reading_spread(histories: list[History], nqm: NQMParams, eval_samples: int) -> tuple[float, float]:
    """(reading-to-reading sd, seed sd) of the accuracy residuals, accuracy units."""
    res = _residuals_by_trial(histories, nqm, eval_samples)
    diffs = np.array([b[0] - a[0] for rs in res.values() for a, b in zip(rs, rs[1:])])
    read_var = float(np.mean(diffs ** 2) / 2) if len(diffs) else 0.0
    means = [(float(np.mean([v for v, _ in rs])), len(rs)) for rs in res.values() if len(rs) > 1]
    seed_var = (float(np.var([m for m, _ in means], ddof=1)) - read_var * float(np.mean([1 / k for _, k in means]))
                if len(means) > 1 else 0.0)
    return math.sqrt(read_var), math.sqrt(max(0.0, seed_var))


def noise_estimates(histories: list[History], nqm: NQMParams, eval_samples: int) -> tuple[float, float, float]:
    """(noise_std, seed_std, accuracy RMSE) from the residuals of the fitted model: the reading noise
    less its binomial part (``eval_samples`` images) is noise_std."""
    res = _residuals_by_trial(histories, nqm, eval_samples)
    read_sd, seed_sd = reading_spread(histories, nqm, eval_samples)
    binom = float(np.mean([a * (1 - a) for rs in res.values() for _, a in rs])) / max(eval_samples, 1)
    all_r = np.array([v for rs in res.values() for v, _ in rs])
    return (round(math.sqrt(max(0.0, read_sd ** 2 - binom)), 6), round(seed_sd, 6),
            float(np.sqrt(np.mean(all_r ** 2))))
