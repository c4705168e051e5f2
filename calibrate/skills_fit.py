"""The skills learning model (sim/skills.py) fitted to real learning curves, with its uncertainty.

A curve is one run: its learning-rate segments and its readings (test accuracy at evaluation
iterations). The fit (settings in ``FitSettings``, committed before any hold-out was scored):

1. **Expected curve.** The model's free parameters (``FREE``: rates and temperatures in log space)
   minimise the sum of squared differences between every reading and the model's expected accuracy,
   from ``starts`` random starting points within the bounds (scipy's bounded least squares), best kept.
2. **Noise.** From the residuals: the part every run of one seed shares at one iteration (the mean
   residual of a seed's runs there, less what the runs' own deviations put in it) is ``shared_std``;
   the rest, less the binomial noise of the evaluation set, is ``ar_std``, with its lag correlation
   between consecutive evaluations turned into ``ar_corr_50``.
3. **Uncertainty.** A Laplace approximation: the covariance ``s^2 (J'J)^-1`` of the transformed
   parameters, widened by ``(1 + rho) / (1 - rho)`` for the lag-1 correlation ``rho`` of the
   residuals (readings that carry one another's error are worth fewer independent ones). A parameter
   whose 95% interval spans more than its whole bound range (or that sits at a bound) is marked not
   identified. Holding those at the prior (``SkillsParams``' defaults) and fitting again is a setting,
   off: those defaults are guesses, and on the digits constants it held 6 of 11 and raised the RMSE
   from 0.076 to 0.091 (the weights and rates trade off along ridges that the 3 constant lrs leave
   open, so their marginal intervals are wide while the fitted curve is not).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator, Sequence

import numpy as np
from scipy.optimize import least_squares

from hetune.sim.skills import Skills, SkillsParams, SkillsState

# name, transform, lower bound, upper bound (natural units)
FREE: tuple[tuple[str, str, float, float], ...] = (
    ("start_logit", "lin", -8.0, 2.0), ("easy_weight", "lin", 0.0, 15.0), ("easy_rate", "log", 1e-5, 1.0),
    ("easy_lr_power", "lin", -3.0, 3.0), ("hard_weight", "lin", 0.0, 15.0), ("hard_rate", "log", 1e-6, 1.0),
    ("hard_lr_power", "lin", 0.0, 6.0), ("memo_weight", "lin", 0.0, 15.0), ("memo_rate", "log", 1e-6, 1.0),
    ("memo_temperature", "log", 1e-3, 10.0), ("floor_weight", "lin", 0.0, 50.0))


@dataclass(frozen=True)
class Curve:
    """One run's learning curve.

    Args:
        run: its name.
        seed: the seed its data order came from (runs of one seed share reading noise).
        segments: (lr, momentum, last iteration) in order: lr from the previous segment's end to this one.
        readings: (iteration, test accuracy in [0, 1]).
        batch: examples per iteration.
    """

    run: str
    seed: int
    segments: tuple[tuple[float, float, int], ...]
    readings: tuple[tuple[int, float], ...]
    batch: int


@dataclass(frozen=True)
class FitSettings:
    """How a fit is made (frozen before any hold-out is scored)."""

    starts: int = 12
    seed: int = 0
    max_nfev: int = 400
    eval_samples: int = 500  # test images of an evaluation (the binomial part of the reading noise)
    identified_share: float = 1.0  # not identified: a 95% interval wider than this share of the bound range
    # "gls": the readings' covariance (shared per seed and iteration, autocorrelated per run) in the likelihood
    # (calibrate/skills_gls.py); "ols": independent readings, the AR(1) lag widening the intervals (the first)
    likelihood: str = "gls"
    hold_unidentified: bool = False  # hold those at the prior and fit again (off: the priors are guesses)
    # the upper bound of the three rates, per iteration: where iterations are epochs (the CSV format) a skill
    # can be learned within one (the digits hold-outs were scored at 1.0, FREE's bound)
    rate_max: float = 100.0


@dataclass
class FitResult:
    """What a fit found: parameters, their intervals, what was held at the prior, the noise, the misfit."""

    params: SkillsParams
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    unidentified: list[str] = field(default_factory=list)
    rmse: float = math.nan
    residual_lag1: float = math.nan
    readings: int = 0
    runs: int = 0
    free: list[str] = field(default_factory=list)  # the fitted parameters, in the order of ``mean`` and ``cov``
    mean: list[float] = field(default_factory=list)  # their estimates, transformed (log where FREE says so)
    cov: list[list[float]] = field(default_factory=list)  # the Laplace covariance of ``mean``

    def uncertainty(self) -> dict[str, Any]:
        """``[learning.uncertainty]``: what a simulated seed draws its parameters from (sim/skills.py)."""
        kinds = {n: k for n, k, _, _ in FREE}
        return {"names": list(self.free), "transforms": [kinds[n] for n in self.free],
                "mean": [float(f"{v:.8g}") for v in self.mean],
                "cov": [[float(f"{v:.8g}") for v in row] for row in self.cov]}

    def learning_file(self, **fit_extra: Any) -> dict[str, Any]:
        """A learning file's tables: ``[learning]`` (kind, params, uncertainty) and ``[fit]`` (``table``
        and ``fit_extra``)."""
        return {"learning": {"kind": "skills", "params": params_table(self.params), "uncertainty": self.uncertainty()},
                "fit": dict(self.table(), **fit_extra)}

    def table(self) -> dict[str, Any]:
        """As plain data (a TOML ``[fit]`` table)."""
        return {"rmse": round(self.rmse, 5), "residual_lag1": round(self.residual_lag1, 4), "readings": self.readings,
                "runs": self.runs, "held_at_prior": self.held,
                "not_identified": self.unidentified,
                "intervals": {k: [float(f"{lo:.5g}"), float(f"{hi:.5g}")] for k, (lo, hi) in self.intervals.items()}}


def _states(model: Skills, curve: Curve, state: SkillsState, rng: np.random.Generator | None) -> Iterator[SkillsState]:
    """The trial's state at each of ``curve``'s reading iterations, from ``state``, through its lr segments
    (the last one goes on past its end); ``rng`` draws the state's own noise (None: none)."""
    st = state
    for it, _ in curve.readings:
        while st.iteration < it:
            lr, m, end = next((s for s in curve.segments if s[2] > st.iteration), curve.segments[-1])
            stop = min(it, end) if end > st.iteration else it
            st = model.advance(st, {"lr": lr, "momentum": m}, stop - st.iteration, rng)
        yield st


def expected(model: Skills, curve: Curve) -> np.ndarray:
    """The model's expected accuracy at each of ``curve``'s reading iterations."""
    return np.array([model.accuracy(st) for st in _states(model, curve, SkillsState(), None)])


def sample_readings(model: Skills, curve: Curve, rng: np.random.Generator) -> np.ndarray:
    """One noisy replicate of ``curve``'s readings under ``model`` (a model ``for_run`` of some seed): the
    trial's deviation and the readings from ``rng``, the run's shared term from the model."""
    return np.array([model.observe(st, rng) for st in _states(model, curve, model.initial_state(rng), rng)])


def coverage(curves: Sequence[Curve], params: SkillsParams, uncertainty: dict[str, Any] | None, eval_samples: int,
             replicates: int = 400, seed: int = 0) -> dict[str, float]:
    """How often the curves' readings fall inside the model's simulated 95% range (each replicate a run of
    its own seed: its own draw of the parameters where ``uncertainty`` is given, its own noise), and the
    range's mean width."""
    sims: dict[str, list[np.ndarray]] = {c.run: [] for c in curves}
    base = Skills(params, curves[0].batch, eval_samples)
    base.uncertainty = uncertainty or {}
    for r in range(replicates):
        model = base.for_run(seed * 1_000_003 + r)
        rng = np.random.default_rng([seed, r])
        for c in curves:  # the runs of one replicate share its seed, as a real design's runs of one seed do
            sims[c.run].append(sample_readings(model, c, rng))
    inside, width, n = 0, 0.0, 0
    for c in curves:
        lo, hi = np.percentile(np.array(sims[c.run]), [2.5, 97.5], axis=0)
        real = np.array([a for _, a in c.readings])
        inside += int(((real >= lo) & (real <= hi)).sum())
        width += float((hi - lo).sum())
        n += len(real)
    return {"inside": inside / n, "width": width / n, "readings": n, "replicates": replicates}


def _to_x(p: SkillsParams, names: Sequence[str]) -> np.ndarray:
    kinds = {n: k for n, k, _, _ in FREE}
    return np.array([math.log(getattr(p, n)) if kinds[n] == "log" else getattr(p, n) for n in names])


def _from_x(x: np.ndarray, names: Sequence[str], base: SkillsParams) -> SkillsParams:
    kinds = {n: k for n, k, _, _ in FREE}
    values: dict[str, Any] = {n: float(math.exp(v) if kinds[n] == "log" else v) for n, v in zip(names, x)}
    return replace(base, **values)


RATES = ("easy_rate", "hard_rate", "memo_rate")


def _bounds(names: Sequence[str], rate_max: float) -> tuple[np.ndarray, np.ndarray]:
    b = {n: (math.log(lo), math.log(rate_max if n in RATES else hi)) if k == "log" else (lo, hi)
         for n, k, lo, hi in FREE}
    return np.array([b[n][0] for n in names]), np.array([b[n][1] for n in names])


def _residuals(curves: Sequence[Curve], params: SkillsParams) -> list[np.ndarray]:
    out = []
    for c in curves:
        model = Skills(params, c.batch, 0)
        out.append(expected(model, c) - np.array([a for _, a in c.readings]))
    return out


def _lag1(res: list[np.ndarray]) -> float:
    a = np.concatenate([r[:-1] for r in res if len(r) > 1])
    b = np.concatenate([r[1:] for r in res if len(r) > 1])
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _fit_mean(curves: Sequence[Curve], names: list[str], prior: SkillsParams, settings: FitSettings,
              whiten: Any = None, start: np.ndarray | None = None) -> Any:
    lo, hi = _bounds(names, settings.rate_max)
    rng = np.random.default_rng(settings.seed)

    def fun(x: np.ndarray) -> np.ndarray:
        res = _residuals(curves, _from_x(x, names, prior))
        return np.concatenate(res) if whiten is None else whiten(res)

    best = None
    for i in range(settings.starts if start is None else 1):
        x0 = start if start is not None else np.clip(_to_x(prior, names), lo, hi) if i == 0 else rng.uniform(lo, hi)
        f = least_squares(fun, x0, bounds=(lo, hi), max_nfev=settings.max_nfev)
        if best is None or f.cost < best.cost:
            best = f
    return best


def _noise(curves: Sequence[Curve], params: SkillsParams, eval_samples: int) -> dict[str, Any]:
    """shared_std, ar_std and ar_corr_50 from the residuals (see the module docstring)."""
    res = _residuals(curves, params)
    by_key: dict[tuple[int, int], list[float]] = {}
    for c, r in zip(curves, res):
        for (it, _), v in zip(c.readings, r):
            by_key.setdefault((c.seed, it), []).append(float(v))
    groups = [v for v in by_key.values() if len(v) >= 2]
    if not groups:
        return {}
    within = float(np.mean([np.var(v, ddof=1) for v in groups]))
    n_mean = float(np.mean([len(v) for v in groups]))
    shared = max(0.0, float(np.var([np.mean(v) for v in groups], ddof=1)) - within / n_mean)
    acc = np.concatenate([np.array([a for _, a in c.readings]) for c in curves])
    binom = float(np.mean(acc * (1 - acc))) / eval_samples if eval_samples > 0 else 0.0
    own = [np.array([v - np.mean(by_key[(c.seed, it)]) for (it, _), v in zip(c.readings, r)])
           for c, r in zip(curves, res)]
    spacing = float(np.median([np.median(np.diff([it for it, _ in c.readings])) for c in curves
                               if len(c.readings) > 1] or [0.0]))
    corr = min(max(_lag1(own), 0.0), 0.99) ** (50.0 / spacing) if spacing > 0 else 0.0
    return {"shared_std": round(math.sqrt(shared), 5), "ar_std": round(math.sqrt(max(0.0, within - binom)), 5),
            "ar_corr_50": round(corr, 4)}


def fit(curves: Sequence[Curve], prior: SkillsParams | None = None, settings: FitSettings | None = None) -> FitResult:
    """Fit the skills model to ``curves`` (see the module docstring)."""
    prior = prior or SkillsParams()
    settings = settings or FitSettings()
    names = [n for n, *_ in FREE]
    held: list[str] = []
    while True:  # fit; where asked, hold what the data do not identify at the prior and fit again
        f = _fit_mean(curves, names, prior, settings)
        params = _from_x(f.x, names, prior)
        rho = min(max(_lag1(_residuals(curves, params)), 0.0), 0.9)
        s2 = 2 * f.cost / max(len(f.fun) - len(names), 1) * (1 + rho) / (1 - rho)
        if settings.likelihood == "gls":  # again, with each seed's readings whitened (calibrate/skills_gls.py)
            from hetune.calibrate.skills_gls import whitener

            for _ in range(2):  # the noise from the last fit's residuals, the fit from the noise
                noisy = replace(params, **_noise(curves, params, settings.eval_samples))
                f = _fit_mean(curves, names, prior, settings, whitener(curves, noisy, settings.eval_samples), f.x)
                params = _from_x(f.x, names, prior)
            s2 = max(1.0, 2 * f.cost / max(len(f.fun) - len(names), 1))  # whitened: about 1 if the noise is right
        cov = s2 * np.linalg.pinv(f.jac.T @ f.jac)
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
        lo, hi = _bounds(names, settings.rate_max)
        weak = [n_ for i, n_ in enumerate(names) if 2 * 1.96 * se[i] > settings.identified_share * (hi[i] - lo[i])
                or min(f.x[i] - lo[i], hi[i] - f.x[i]) < 1e-6 * (hi[i] - lo[i])]
        if not weak or held or not settings.hold_unidentified:
            break
        held = weak
        names = [n_ for n_ in names if n_ not in held]
    kinds = {n_: kd for n_, kd, _, _ in FREE}
    intervals = {}
    for i, n_ in enumerate(names):
        a, b = f.x[i] - 1.96 * se[i], f.x[i] + 1.96 * se[i]
        # a parameter the data barely touch can have an interval past any float: capped at e^+-700
        intervals[n_] = ((math.exp(max(min(a, 700.0), -700.0)), math.exp(max(min(b, 700.0), -700.0)))
                         if kinds[n_] == "log" else (a, b))
    params = replace(params, **_noise(curves, params, settings.eval_samples))
    res = _residuals(curves, params)
    allres = np.concatenate(res)
    return FitResult(params, intervals, held, sorted(set(weak) - set(held)), float(np.sqrt(np.mean(allres ** 2))),
                     _lag1(res), len(allres), len(curves), list(names), [float(v) for v in f.x],
                     [[float(v) for v in row] for row in (cov + cov.T) / 2])


def params_table(p: SkillsParams) -> dict[str, Any]:
    """``[learning.params]`` of a fitted model (finite values only: TOML has no inf)."""
    return {k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in asdict(p).items()
            if not (isinstance(v, float) and math.isinf(v))}
