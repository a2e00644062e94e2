"""Synthetic damped oscillators with a regime shift, irregularly sampled (the LLapDiff demo data)."""

from __future__ import annotations

import math

import numpy as np
import torch

DT = 0.25  # time units per grid step


def regime_oscillators(
    num_series: int,
    history: int = 96,
    horizon: int = 48,
    num_channels: int = 3,
    missing_rate: float = 0.0,
    noise: float = 0.02,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Series mixing two damped oscillators whose frequency (x2) or decay (x2.5) jumps at a change point.

    Returns history values (N, Th, C) (NaN where dropped), mask (N, Th, C), history times (N, Th) in
    (-Th*DT, 0], horizon targets (N, H, C), horizon times (N, H) in (0, H*DT], plus the clean history and
    the post-shift true (rho, omega) of both oscillators (N, 2, 2). Grid points are dropped at random
    (all channels together) with probability `missing_rate`; the last history point is always kept.
    Each series is normalised by the mean/std of its observed history.
    """
    if num_series < 1 or history < 4 or horizon < 1 or num_channels < 1:
        raise ValueError("need `num_series` >= 1, `history` >= 4, `horizon` >= 1, `num_channels` >= 1.")
    if not 0.0 <= missing_rate < 1.0:
        raise ValueError(f"`missing_rate` must be in [0, 1), got {missing_rate}.")
    rng = np.random.default_rng(seed)
    steps = history + horizon
    rho = rng.uniform(0.01, 0.04, (num_series, 2))
    omega = rng.uniform(0.3, 1.5, (num_series, 2))  # x2 after a shift stays below pi
    change = rng.integers(history // 4, history - 8, num_series)
    kind = rng.random(num_series) < 0.5  # True: frequency x2, False: decay x2.5
    state = rng.normal(size=(num_series, 2, 2))  # (N, oscillator, [cos, sin])
    latent = np.zeros((num_series, steps, 2))
    true_post = np.zeros((num_series, 2, 2))
    for n in range(num_series):
        r, w = rho[n].copy(), omega[n].copy()
        for t in range(steps):
            if t == change[n]:
                w, r = (w * 2, r) if kind[n] else (w, r * 2.5)
                w = np.minimum(w, 0.95 * math.pi)  # keep every frequency inside the pole range (0, pi)
            decay, ang = np.exp(-r * DT), w * DT
            c, s = np.cos(ang), np.sin(ang)
            x, y = state[n, :, 0].copy(), state[n, :, 1].copy()
            state[n, :, 0], state[n, :, 1] = decay * (c * x - s * y), decay * (s * x + c * y)
            latent[n, t] = state[n, :, 0]
        true_post[n] = np.stack([r, w], -1)
    mixing = rng.normal(size=(num_series, num_channels, 2))
    values = np.einsum("ncl,ntl->ntc", mixing, latent) + noise * rng.normal(
        size=(num_series, steps, num_channels)
    )
    keep = rng.random((num_series, history)) >= missing_rate
    keep[:, -1] = True
    mask = np.repeat(keep[..., None], num_channels, -1).astype(np.float32)
    hist = values[:, :history]
    mean = (hist * mask).sum(1, keepdims=True) / mask.sum(1, keepdims=True)
    std = np.sqrt((((hist - mean) * mask) ** 2).sum(1, keepdims=True) / mask.sum(1, keepdims=True)) + 1e-3
    values = (values - mean) / std
    grid = (np.arange(steps) - (history - 1)) * DT  # last history point at t = 0
    f = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    hist_vals = np.where(mask > 0, values[:, :history], np.nan)
    return {
        "hist": f(hist_vals),
        "mask": f(mask),
        "t_hist": f(np.broadcast_to(grid[:history], (num_series, history)).copy()),
        "target": f(values[:, history:]),
        "t_query": f(np.broadcast_to(grid[history:], (num_series, horizon)).copy()),
        "hist_clean": f(values[:, :history]),
        "true_poles": f(true_post),
        "zero_level": f((0.0 - mean) / std),  # (N, 1, C): where the raw signal 0 lands after normalising
    }
