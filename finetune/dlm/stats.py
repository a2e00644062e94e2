"""Statistics for DLM results: IQM with stratified-bootstrap intervals and probability of improvement
(`rliable`, Agarwal et al. 2021), and Wilson intervals for win and invalid-action rates.

Score matrices are (training runs, evaluation start states): every trained model plays the same start
states, so a start state is a stratum and the bootstrap resamples training runs within each one.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

__all__ = ["iqm_interval", "probability_of_improvement", "summary", "verdict", "wilson_interval"]


def _arch_compat() -> None:
    """rliable 1.2 passes `random_state=` to arch's bootstraps; arch 8 (needed with pandas 3) calls it `seed`."""
    import arch.bootstrap.base as base

    for cls in (base.IIDBootstrap, base.IndependentSamplesBootstrap):
        init = cls.__init__
        if "random_state" in inspect.signature(init).parameters or getattr(init, "_dlm_compat", False):
            continue

        def patched(self, *args, random_state=None, seed=None, _init=init, **kwargs):
            _init(self, *args, seed=random_state if seed is None else seed, **kwargs)

        patched._dlm_compat = True
        cls.__init__ = patched


def _rliable():
    try:
        from rliable import library, metrics
    except ImportError as err:
        raise ImportError(
            "DLM statistics need `pip install rliable` (with pandas >= 3 also `pip install --no-deps "
            "arch==8.0.0`, since rliable's arch 7 pin does not import there)."
        ) from err
    _arch_compat()
    return library, metrics


def iqm_interval(scores: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """IQM of a (runs, start states) score matrix and its 95% stratified-bootstrap interval."""
    library, metrics = _rliable()
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.size == 0:
        raise ValueError(f"scores must be a non-empty (runs, start states) matrix, got shape {scores.shape}.")
    point = float(metrics.aggregate_iqm(scores))
    if scores.shape[0] < 2:  # one run: resample start states instead (task bootstrap), else no spread at all
        return point, *_task_bootstrap(scores, metrics.aggregate_iqm, reps, seed)
    np.random.seed(seed)  # rliable's stratified resampling draws from numpy's global generator
    _, ci = library.get_interval_estimates(
        {"m": scores}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps
    )
    return point, float(ci["m"][0, 0]), float(ci["m"][1, 0])


def _task_bootstrap(scores: np.ndarray, func, reps: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    n = scores.shape[1]
    vals = [func(scores[:, rng.integers(0, n, n)]) for _ in range(reps)]
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """P(X > Y) (ties count half) averaged over start states, with a 95% bootstrap interval.

    With several runs per method this is rliable's statistic (Mann-Whitney over runs within each start
    state, averaged), bootstrapped over runs; with one run per method the runs cannot be resampled, so the
    interval resamples start states.
    """
    library, metrics = _rliable()
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"X and Y must share start states, got {x.shape[1]} and {y.shape[1]} columns.")
    point = float(metrics.probability_of_improvement(x, y))
    if min(x.shape[0], y.shape[0]) < 2:
        rng = np.random.default_rng(seed)
        n = x.shape[1]
        vals = []
        for _ in range(reps):
            cols = rng.integers(0, n, n)
            vals.append(metrics.probability_of_improvement(x[:, cols], y[:, cols]))
        return point, float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))
    np.random.seed(seed)
    _, ci = library.get_interval_estimates({"xy": (x, y)}, metrics.probability_of_improvement, reps=reps)
    lo, hi = np.ravel(ci["xy"])
    return point, float(lo), float(hi)


def wilson_interval(successes: int, trials: int) -> tuple[float, float, float]:
    """Rate and its 95% Wilson score interval (binomial; sound at 0/n and n/n, unlike mean +- t)."""
    from scipy.stats import binomtest

    if trials < 1:
        return float("nan"), float("nan"), float("nan")
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=0.95, method="wilson")
    return successes / trials, float(ci.low), float(ci.high)


def verdict(poi: tuple[float, float, float]) -> str:
    """'wins' / 'loses' when the whole interval of P(DLM > baseline) is above / below 0.5, else 'ties'."""
    _, lo, hi = poi
    if lo > 0.5:
        return "wins"
    if hi < 0.5:
        return "loses"
    return "ties"


def summary(scores: np.ndarray, wins: np.ndarray, invalid: int, decisions: int, reps: int) -> dict[str, Any]:
    """The numbers of one results row."""
    iqm = iqm_interval(scores, reps)
    win = wilson_interval(int(np.sum(wins)), int(np.size(wins)))
    inv = wilson_interval(int(invalid), int(decisions))
    return {
        "runs": int(scores.shape[0]),
        "episodes_per_run": int(scores.shape[1]),
        "return_mean": float(np.mean(scores)),
        "return_iqm": iqm,
        "win_rate": win,
        "invalid_rate": inv,
        "invalid": int(invalid),
        "decisions": int(decisions),
    }
