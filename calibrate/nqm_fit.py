"""Fit the noisy quadratic model (sim/nqm.py) to recorded training: ``hetune calibrate curves --kind nqm``.

The data are trial histories (calibrate/histories.py): readings of test accuracy, and of training loss
where recorded, each after iterations at a known (lr, momentum) and batch, with PBT's exploits as
segments that start from a donor's checkpoint. For a parameter set the model replays every history
exactly (expected second moments, no luck) and predicts each reading; least squares
(scipy.optimize.least_squares, trust-region reflective within bounds) finds the parameters.

Fitted, in transformed coordinates so that steps are relative: log curvature_max, log curvature_min,
log noise, max_accuracy as a logit between chance and 1, log loss_half, log slope; with losses two
more, the loss's floor and scale (training loss = floor + scale x relative excess loss, compared in
log). ``dims`` and ``chance_accuracy`` (1 / classes) are not fitted. Accuracy and loss residuals are
weighted by their own spread (a first fit on accuracy alone measures it).

What the data identify. Each parameter's 95% interval is its profile likelihood's: the parameter held
at values walked away from the fit, the others refitted, until the sum of squared scaled residuals
rises by 3.84 (chi-square, one degree of freedom). A profile, unlike a bootstrap around the fit, sees
the likelihood's ridges (curvature_max against noise): on generated data, percentile bootstraps
covered the truth in about half the cases, the profile in the ninety percent the bench reports. A
parameter whose interval does not close, or spans more than a factor of 10 (max_accuracy: more than
0.2), is not identified: it is set to its prior (the experiment's value) and the rest are refitted
and profiled again; their intervals then also hold the first pass's, in which the held parameters
could move (the prior may be wrong, and the rest fitted around it).

Why the data's design matters: the constant-lr runs at several learning rates set the spectrum's
speed and where training diverges; only an lr change shows
the noise floor (the drop's jump is the floor that the high lr held); a second batch size separates
the noise from the curvature; losses separate the loss-to-accuracy map from the spectrum.

The evaluation noise (``noise_std``) and the seed spread (``seed_std``) are moment estimates from the
residuals: consecutive readings of one trial differ by the reading noise twice over (a slow misfit
cancels), the binomial part of ``eval_samples`` images is subtracted; what remains of the spread of
per-trial mean residuals is the seed spread.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
from scipy.optimize import least_squares

from hetune.calibrate.histories import History, summary
from hetune.calibrate.nqm_replay import noise_estimates, predict
from hetune.sim.errors import ConfigError
from hetune.sim.nqm import NQMParams

FITTED = ("curvature_max", "curvature_min", "noise", "max_accuracy", "loss_half", "slope")
LOSS_TERMS = ("loss_floor", "loss_scale")
# bounds of the transformed coordinates (log for the positive ones; max_accuracy's logit)
BOUNDS = {"curvature_max": (-7.0, 9.0), "curvature_min": (-16.0, 5.0), "noise": (-7.0, 14.0),
          "max_accuracy": (-6.0, 8.0), "loss_half": (-12.0, 0.0), "slope": (-3.0, 3.0),
          "loss_floor": (-12.0, 3.0), "loss_scale": (-7.0, 5.0)}
SPAN = {"max_accuracy": 0.2}  # an identified max_accuracy is known to within 0.2 (95%)
FACTOR = 10.0  # an identified positive parameter is known to within this factor (95% interval)
CHI2_95 = 3.841  # chi-square quantile, 1 degree of freedom: the profile's 95% interval
STEP, MAX_STEPS, REFINE = 0.35, 7, 2  # the profile's walk (transformed units): 2.45 each side decides "within x10"


def _to_x(name: str, v: float, chance: float) -> float:
    if name == "max_accuracy":
        f = min(max((v - chance) / (1 - chance), 1e-6), 1 - 1e-6)
        return math.log(f / (1 - f))
    return math.log(max(v, 1e-300))


def _from_x(name: str, x: float, chance: float) -> float:
    if name == "max_accuracy":
        return chance + (1 - chance) / (1 + math.exp(-x))
    return math.exp(x)


@dataclasses.dataclass
class Problem:
    """What one least-squares fit needs: the data, which parameters are free, the fixed values."""

    histories: list[History]
    prior: NQMParams
    eval_samples: int
    free: list[str]
    use_loss: bool
    acc_sd: float = 1.0
    loss_sd: float = 1.0
    fixed_loss: tuple[float, float] = (0.0, 1.0)
    threshold: float = CHI2_95  # the rise of the sum of squares that bounds a 95% profile interval

    @property
    def chance(self) -> float:
        return self.prior.chance_accuracy

    def params(self, x: np.ndarray) -> tuple[NQMParams, tuple[float, float]]:
        values: dict[str, Any] = {n: _from_x(n, float(v), self.chance) for n, v in zip(self.free, x)}
        nqm = dataclasses.replace(self.prior, **{n: values[n] for n in FITTED if n in values})
        if nqm.curvature_min > nqm.curvature_max:  # the spectrum is a set: order it
            nqm = dataclasses.replace(nqm, curvature_min=nqm.curvature_max, curvature_max=nqm.curvature_min)
        loss = (values.get("loss_floor", self.fixed_loss[0]), values.get("loss_scale", self.fixed_loss[1]))
        return nqm, loss

    def x0(self, nqm: NQMParams, loss: tuple[float, float]) -> np.ndarray:
        vals = {**dataclasses.asdict(nqm), "loss_floor": loss[0], "loss_scale": loss[1]}
        return np.array([np.clip(_to_x(n, vals[n], self.chance), *BOUNDS[n]) for n in self.free])

    def residuals(self, x: np.ndarray, acc: np.ndarray | None = None, loss: np.ndarray | None = None
                  ) -> np.ndarray:
        nqm, (floor, scale) = self.params(x)
        pred = predict(self.histories, nqm, self.eval_samples)
        a_obs = acc if acc is not None else np.array([r.accuracy for r, _, _ in pred if r.accuracy is not None])
        a_hat = np.array([a for r, a, _ in pred if r.accuracy is not None])
        res = [(a_obs - a_hat) / self.acc_sd]
        if self.use_loss:
            l_obs = loss if loss is not None else np.log([r.loss for r, _, _ in pred if r.loss is not None])
            l_hat = np.log([floor + scale * min(rel, 1e12) for r, _, rel in pred if r.loss is not None])
            res.append((l_obs - l_hat) / self.loss_sd)
        return np.concatenate(res)

    def lag1(self, x: np.ndarray) -> float:
        """Pooled lag-1 autocorrelation of consecutive scaled residuals within each trial (accuracy
        and loss series apart): a trial's luck carries from one reading to the next."""
        nqm, (floor, scale) = self.params(x)
        owner = {id(r): i for i, h in enumerate(self.histories) for r in h.readings()}
        series: dict[tuple[int, str], list[float]] = {}
        for r, a, rel in predict(self.histories, nqm, self.eval_samples):
            if r.accuracy is not None:
                series.setdefault((owner.get(id(r), -1), "acc"), []).append((r.accuracy - a) / self.acc_sd)
            if self.use_loss and r.loss is not None:
                hat = math.log(floor + scale * min(rel, 1e12))
                series.setdefault((owner.get(id(r), -1), "loss"), []).append((math.log(r.loss) - hat) / self.loss_sd)
        num = sum(float(np.dot(v[:-1], v[1:])) for v in map(np.asarray, series.values()) if len(v) > 1)
        den = sum(float(np.dot(v, v)) for v in map(np.asarray, series.values()))
        return num / den if den > 0 else 0.0


def inflation(rho: float) -> float:
    """How much wider (in the sum of squares) an interval must be when residuals are autocorrelated
    with lag-1 coefficient ``rho``: (1 + rho) / (1 - rho), the variance factor of a mean of an AR(1)
    series; 1 for rho <= 0, at most 10."""
    return 1.0 if rho <= 0 else min((1 + rho) / (1 - min(rho, 0.99)), 10.0)


def _solve(p: Problem, starts: list[np.ndarray], fun: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    lo = np.array([BOUNDS[n][0] for n in p.free])
    hi = np.array([BOUNDS[n][1] for n in p.free])
    best, cost = starts[0], math.inf
    for x0 in starts:
        # dogbox: on this model's ridges (curvature against noise) trf stops short of the minimum
        sol = least_squares(fun, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), method="dogbox",
                            max_nfev=100 * (len(x0) + 1), ftol=1e-12, xtol=1e-12, gtol=1e-12)
        if sol.cost < cost:
            best, cost = sol.x, float(sol.cost)
    return best


def check_design(histories: list[History]) -> dict[str, Any]:
    """Refuse data that identify nothing; return what they hold (histories.summary)."""
    s = summary(histories)
    if s["accuracies"] < 6 or len(s["lrs"]) < 2:
        lrs = ", ".join(f"{v:g}" for v in s["lrs"]) or "none"
        raise ConfigError("runs", "", f"{s['trials']} trials, {s['accuracies']} accuracy readings at learning rate(s) "
                                      f"{lrs}: too little to fit; record at least three constant-lr runs at "
                                      f"different learning rates and one run with an lr drop")
    return s


def fit_nqm(histories: list[History], prior: NQMParams, eval_samples: int, use_loss: bool = True,
            seed: int = 0, starts: int = 3) -> dict[str, Any]:
    """Fit; profile each parameter; set what the data did not identify to the prior and fit again.

    Args:
        histories: the data.
        prior: the experiment's parameters: starting point and the value of what is not identified.
        eval_samples: test images per evaluation (the binomial part of the reading noise).
        use_loss: fit recorded training losses too.
        seed: seed of the extra starting points.
        starts: starting points of the first fit (the prior, then random ones around it).

    Returns:
        {"params": NQMParams, "table": {name: {estimate, low, high, identified, prior}}, "design":
        summary, "rmse": accuracy residual RMSE, "noise_std"/"seed_std" estimates, "readings": n}.
    """
    design = check_design(histories)
    use_loss = use_loss and design["losses"] >= 6
    free = list(FITTED) + (list(LOSS_TERMS) if use_loss else [])
    rng = np.random.default_rng(seed)
    unidentified: list[str] = []
    table: dict[str, dict[str, Any]] = {}
    first: dict[str, dict[str, Any]] = {}
    rho = 0.0
    while True:  # again only when a pass found parameters the data did not identify
        p = Problem(histories, prior, eval_samples, [n for n in free if n not in unidentified], use_loss)
        x = _first_fit(p, rng, starts)
        rho = p.lag1(x)
        p.threshold = CHI2_95 * inflation(rho)
        for _ in range(3):  # a profile that finds a lower cost moves the fit there
            prof, better = _profile(p, x)
            if better is None:
                break
            x = _solve(p, [better], p.residuals)
        table = _table(p, x, prof)
        first = first or table
        # the loss map's floor and scale are nuisance terms with no prior: they stay free
        newly = [n for n, row in table.items()
                 if not row["identified"] and n not in unidentified and n not in LOSS_TERMS]
        unidentified += newly
        if not newly or not [n for n in FITTED if n not in unidentified]:
            break
    nqm, loss = p.params(x)
    if not [n for n in FITTED if n not in unidentified]:  # nothing identified: the prior, as the table says
        nqm = prior
    # With parameters held at their priors the others are fitted given those values, and the prior may
    # be wrong: an interval is widened to hold the first pass's too, whose profile let every parameter
    # move (so it holds wherever the held ones truly are).
    for n, row in table.items():
        if unidentified and row["identified"] and n in first and first[n]["identified"]:
            row["low"], row["high"] = min(row["low"], first[n]["low"]), max(row["high"], first[n]["high"])
    for n in unidentified:
        table[n] = {"estimate": getattr(prior, n, None), "low": None, "high": None, "identified": False,
                    "prior": getattr(prior, n, None)}
    noise_std, seed_std, rmse = noise_estimates(histories, nqm, eval_samples)
    nqm = dataclasses.replace(nqm, noise_std=noise_std, seed_std=seed_std)
    return {"params": nqm, "table": table, "design": design, "rmse": rmse, "noise_std": noise_std,
            "seed_std": seed_std, "loss_map": loss if use_loss else None, "readings": design["accuracies"],
            "lag1": round(rho, 4), "inflation": round(inflation(rho), 4)}


def _first_fit(p: Problem, rng: np.random.Generator, starts: int) -> np.ndarray:
    """Accuracy alone first (from the prior and random starts), which measures its spread; then, with
    losses, the loss map started from that fit's predictions and the joint fit from that fit and from
    the prior, each term weighted by its own residual spread (measured, refitted once)."""
    loss_on, full_free = p.use_loss, p.free
    p.use_loss, p.free = False, [n for n in p.free if n not in LOSS_TERMS]
    x0 = p.x0(p.prior, p.fixed_loss)
    inits = [x0] + _scouts(p, x0, rng, max(0, starts - 1))
    x = _solve(p, inits, p.residuals)
    p.acc_sd = max(_sd(p.residuals(x), len(x)), 1e-4)
    p.free = full_free
    if not loss_on:
        return x
    p.use_loss = True
    joint = [np.concatenate([v, _loss_start(p, v)]) for v in (x, x0)]
    n_acc = sum(r.accuracy is not None for h in p.histories for r in h.readings())
    for _ in range(2):
        r = p.residuals(joint[0])
        share = len(joint[0]) * n_acc / len(r)  # the parameters' share of each kind of reading
        p.loss_sd = max(_sd(r[n_acc:], len(joint[0]) - share) * p.loss_sd, 1e-4)
        p.acc_sd = max(_sd(r[:n_acc], share) * p.acc_sd, 1e-4)
        joint = [_solve(p, joint, p.residuals)]
    return joint[0]


def _scouts(p: Problem, x0: np.ndarray, rng: np.random.Generator, k: int, draws: int = 64) -> list[np.ndarray]:
    """The ``k`` cheapest of ``draws`` random points far around the prior (2.5 transformed units: a
    prior stated at another batch or lr scale can be off by orders of magnitude), as starts."""
    lo = np.array([BOUNDS[n][0] for n in p.free])
    hi = np.array([BOUNDS[n][1] for n in p.free])
    pts = [np.clip(x0 + rng.normal(0, 2.5, len(x0)), lo, hi) for _ in range(draws)]
    costs = [float(np.sum(p.residuals(v) ** 2)) for v in pts]
    return [pts[i] for i in np.argsort(costs)[:k]]


def _sd(r: np.ndarray, params: float) -> float:
    """Residual spread with the degrees of freedom the fitted parameters took (sqrt(SS / (n - p)))."""
    return float(np.sqrt(np.sum(r * r) / max(len(r) - params, 1.0)))


def _loss_start(p: Problem, x: np.ndarray) -> np.ndarray:
    """A start for the loss map at accuracy-only parameters ``x``: half the smallest recorded loss as the
    floor, the median ratio of the rest to the predicted relative loss as the scale (transformed)."""
    nqm, _ = p.params(x)
    pred = predict(p.histories, nqm, p.eval_samples)
    obs = np.array([r.loss for r, _, _ in pred if r.loss is not None])
    rel = np.array([rel for r, _, rel in pred if r.loss is not None])
    floor = max(float(np.min(obs)) * 0.5, 1e-6)
    scale = max(float(np.median((obs - floor) / np.maximum(rel, 1e-9))), 1e-6)
    return np.array([np.clip(math.log(floor), *BOUNDS["loss_floor"]), np.clip(math.log(scale), *BOUNDS["loss_scale"])])


def _table(p: Problem, x: np.ndarray, prof: dict[str, tuple[float, float, bool]]) -> dict[str, dict[str, Any]]:
    """Estimates and profile intervals in natural units; identified: closed and narrow enough."""
    table = {}
    for j, n in enumerate(p.free):
        q_lo, q_hi, closed = prof[n]
        low, high = _from_x(n, q_lo, p.chance), _from_x(n, q_hi, p.chance)
        narrow = (high - low <= SPAN[n]) if n in SPAN else (high <= FACTOR * low)
        table[n] = {"estimate": _from_x(n, float(x[j]), p.chance), "low": low, "high": high,
                    "identified": bool(closed and narrow), "prior": getattr(p.prior, n, None)}
    return table


def _profile(p: Problem, x: np.ndarray) -> tuple[dict[str, tuple[float, float, bool]], np.ndarray | None]:
    """Profile-likelihood 95% intervals: for each free parameter, walk away from the fit in steps of
    ``STEP`` (transformed units), refitting the others (warm-started from the last point), until the
    sum of squared scaled residuals rises by ``CHI2_95`` (chi-square, 1 degree of freedom) or a bound
    is reached (then the interval is open there).

    Returns:
        ({name: (low, high, closed at both ends)} in transformed units, a point with a lower cost than
        the fit if the walk found one (the fit stopped on a ridge short of its minimum), else None).
    """
    c0 = float(np.sum(p.residuals(x) ** 2))
    out: dict[str, tuple[float, float, bool]] = {}
    better, best_c = None, c0 - 1e-6
    for j, name in enumerate(p.free):
        q = dataclasses.replace(p, free=[n for n in p.free if n != name])
        ends, closed = [], True
        for sign in (-1.0, 1.0):
            lo_b, hi_b = BOUNDS[name]
            v, prev_v, prev_d, xs = float(x[j]), float(x[j]), 0.0, np.delete(x, j)
            end = None
            for _ in range(MAX_STEPS):
                v = min(max(v + sign * STEP, lo_b), hi_b)
                q.prior = dataclasses.replace(p.prior, **_one(name, v, p))
                q.fixed_loss = _one_loss(name, v, p)
                xs = _solve(q, [xs], q.residuals)
                c = float(np.sum(q.residuals(xs) ** 2))
                if c < best_c:
                    best_c, better = c, np.insert(xs, j, v)
                d = c - c0
                if d >= p.threshold:  # crossed: find where, by the square root of the rise (linear in the
                    # distance where the profile is quadratic), refined by two more refits
                    for _ in range(REFINE):
                        mid = _cross(prev_v, prev_d, v, d, p.threshold)
                        q.prior = dataclasses.replace(p.prior, **_one(name, mid, p))
                        q.fixed_loss = _one_loss(name, mid, p)
                        xm = _solve(q, [xs], q.residuals)
                        dm = float(np.sum(q.residuals(xm) ** 2)) - c0
                        if dm >= p.threshold:
                            v, d = mid, dm
                        else:
                            prev_v, prev_d = mid, dm
                    end = _cross(prev_v, prev_d, v, d, p.threshold)
                    break
                prev_v, prev_d = v, d
                if v in (lo_b, hi_b):
                    break
            if end is None:
                end, closed = v, False
            ends.append(end)
        out[name] = (ends[0], ends[1], closed)
    return out, better


def _cross(v0: float, d0: float, v1: float, d1: float, threshold: float) -> float:
    """Where the rise of the profile reaches ``threshold`` between (v0, d0) below and (v1, d1) above it,
    interpolating the square root of the rise."""
    r0, r1 = math.sqrt(max(d0, 0.0)), math.sqrt(d1)
    return v0 + (v1 - v0) * (math.sqrt(threshold) - r0) / max(r1 - r0, 1e-12)


def _one(name: str, v: float, p: Problem) -> dict[str, Any]:
    """The NQM parameter ``name`` held at transformed value ``v`` (nothing for the loss terms)."""
    return {name: _from_x(name, v, p.chance)} if name in FITTED else {}


def _one_loss(name: str, v: float, p: Problem) -> tuple[float, float]:
    if name == "loss_floor":
        return (math.exp(v), p.fixed_loss[1])
    if name == "loss_scale":
        return (p.fixed_loss[0], math.exp(v))
    return p.fixed_loss
