"""Statistics for DLM results: IQM with stratified-bootstrap intervals and probability of improvement
(the `rliable` protocol, Agarwal et al. 2021), and Wilson intervals for win and invalid-action rates.

Score matrices are (training runs, evaluation start states): every trained model plays the same start
states, so a start state is a stratum and the bootstrap resamples training runs within each one.

Point estimates are rliable's own metrics. The bootstrap draws rliable's stratified resamples (each cell
picks a run of its own column, with replacement; X and Y independently for the probability of
improvement) as one numpy array instead of rliable's per-resample loop, whose Mann-Whitney call per start
state took 14 s per 200-resample interval on one CPU core; the tests check the intervals against
`rliable.library.get_interval_estimates`.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from scipy.stats import trim_mean

from eval.report import wilson
from latent.entry import install_line

__all__ = [
    "iqm_interval",
    "pairwise_improvement",
    "probability_of_improvement",
    "stratified_resamples",
    "summary",
    "verdict",
    "wilson_interval",
]


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
            f"DLM statistics need rliable, of the dlm extra: {install_line('dlm')} (with pandas >= 3 also "
            "`pip install --no-deps arch==8.0.0`, since rliable's arch 7 pin does not import there)."
        ) from err
    _arch_compat()
    return library, metrics


def _matrix(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.size == 0:
        raise ValueError(f"{name} must be a non-empty (runs, start states) matrix, got shape {scores.shape}.")
    return scores


def stratified_resamples(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, runs, start states): every cell draws a run of its own start state, with replacement.

    With a single run there is nothing to resample within a start state, so whole start states are
    resampled instead (rliable's task bootstrap), or every interval would have zero width."""
    runs, states = scores.shape
    if runs < 2:
        return scores[:, rng.integers(0, states, (reps, states))].transpose(1, 0, 2)
    picks = rng.integers(0, runs, (reps, runs, states))
    return scores[picks, np.arange(states)]


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def iqm_interval(scores: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """IQM of a (runs, start states) score matrix and its 95% stratified-bootstrap percentile interval."""
    _, metrics = _rliable()
    scores = _matrix(scores)
    point = float(metrics.aggregate_iqm(scores))
    boot = stratified_resamples(scores, reps, np.random.default_rng(seed))
    return point, *_percentiles(trim_mean(boot.reshape(reps, -1), 0.25, axis=1))


def pairwise_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + P(X = Y) / 2 over run pairs of each start state, averaged over start states.

    x (..., runs_x, states), y (..., runs_y, states) -> (...): rliable's `probability_of_improvement`
    (Mann-Whitney U / (n_x n_y) per start state) for a whole stack of resamples at once."""
    gt = (x[..., :, None, :] > y[..., None, :, :]).mean(axis=(-3, -2))
    eq = (x[..., :, None, :] == y[..., None, :, :]).mean(axis=(-3, -2))
    return (gt + 0.5 * eq).mean(axis=-1)


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """P(X > Y) (ties count half) averaged over start states, with a 95% stratified-bootstrap interval.

    X and Y are resampled independently, runs within each start state (rliable's independent stratified
    bootstrap); when either has a single run, start states are resampled, the same ones for both."""
    _, metrics = _rliable()
    x, y = _matrix(x, "X"), _matrix(y, "Y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"X and Y must share start states, got {x.shape[1]} and {y.shape[1]} columns.")
    point = float(metrics.probability_of_improvement(x, y))
    rng = np.random.default_rng(seed)
    if min(x.shape[0], y.shape[0]) < 2:
        cols = rng.integers(0, x.shape[1], (reps, x.shape[1]))
        boot = pairwise_improvement(x[:, cols].transpose(1, 0, 2), y[:, cols].transpose(1, 0, 2))
    else:
        boot = pairwise_improvement(stratified_resamples(x, reps, rng), stratified_resamples(y, reps, rng))
    return point, *_percentiles(boot)


# scipy.stats.norm.ppf(0.975), the quantile this module's intervals were first computed with (scipy's
# `binomtest(...).proportion_ci(method="wilson")`): with it the project's one Wilson formula reproduces them
# to 1e-15, so committed tables keep their digits.
_Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int) -> tuple[float, float, float]:
    """Rate and its 95% Wilson score interval (binomial; sound at 0/n and n/n, unlike mean +- t): the
    project's one formula, `eval.report.wilson`, with the rate in front; NaNs for zero trials."""
    if trials < 1:
        return float("nan"), float("nan"), float("nan")
    lo, hi = wilson(int(successes), int(trials), z=_Z95)
    return successes / trials, lo, hi


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
