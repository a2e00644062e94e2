"""Data for the ConFlux demo: latent-factor multivariate series in shuffled order, and statsmodels macrodata."""

from __future__ import annotations

import numpy as np


def latent_factor_series(
    steps: int,
    num_variables: int = 32,
    num_factors: int = 4,
    noise: float = 0.3,
    seed: int = 0,
    shuffle: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(series (T, N), group (N,)): each variable is a noisy lagged mixture of one of a few latent factors.

    Factors are seasonal AR(2) processes with different periods; variables of a factor are adjacent
    before shuffling, so a random shuffle hides the grouping that a seriation must recover.
    """
    if steps < 10 or num_variables < 1 or num_factors < 1 or noise < 0:
        raise ValueError("need `steps` >= 10, `num_variables` >= 1, `num_factors` >= 1 and `noise` >= 0.")
    rng = np.random.default_rng(seed)
    t = np.arange(steps + 8)
    factors = np.zeros((steps + 8, num_factors))
    for k in range(num_factors):
        period = rng.uniform(12, 60)
        ar = np.zeros(steps + 8)
        for i in range(2, steps + 8):
            ar[i] = 1.5 * ar[i - 1] - 0.6 * ar[i - 2] + 0.3 * rng.standard_normal()
        factors[:, k] = np.sin(2 * np.pi * t / period + rng.uniform(0, 6.3)) + 0.5 * ar / (ar.std() + 1e-9)
    group = np.sort(rng.integers(0, num_factors, num_variables))
    lags = rng.integers(0, 8, num_variables)
    scale = rng.uniform(0.5, 2.0, num_variables)
    series = np.stack(
        [scale[j] * factors[8 - lags[j] : 8 - lags[j] + steps, group[j]] for j in range(num_variables)], 1
    )
    series = series + noise * rng.standard_normal(series.shape) + rng.normal(0, 1, num_variables)
    if shuffle:
        order = rng.permutation(num_variables)
        series, group = series[:, order], group[order]
    return series.astype(np.float32), group


def windows(series: np.ndarray, context: int, horizon: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Sliding windows of a (T, N) array: inputs (W, N, context) and targets (W, N, horizon)."""
    if series.ndim != 2 or series.shape[0] < context + horizon:
        raise ValueError(f"need a (T, N) series with T >= context + horizon, got {series.shape}.")
    starts = np.arange(0, series.shape[0] - context - horizon + 1, stride)
    x = np.stack([series[s : s + context].T for s in starts])
    y = np.stack([series[s + context : s + context + horizon].T for s in starts])
    return x, y


def macrodata() -> np.ndarray:
    """statsmodels macrodata as log-differenced growth rates where positive (202, 12): bundled, offline."""
    from statsmodels.datasets import macrodata as md

    df = md.load_pandas().data.drop(columns=["year", "quarter"])
    arr = df.to_numpy(dtype=np.float64)
    pos = (arr > 0).all(0)
    arr = np.where(pos, np.log(np.where(pos, arr, 1.0)), arr)
    return np.diff(arr, axis=0).astype(np.float32)
