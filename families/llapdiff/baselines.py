"""Baselines for LLapDiff: GRU with time gaps (own), Neural CDE (torchcde), DLinear and the probabilistic
DeepAR (neuralforecast), SAITS imputation (pypots), linear interpolation. Heavy packages are imported inside the functions."""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)


def interpolate_history(hist: torch.Tensor, t_hist: torch.Tensor) -> torch.Tensor:
    """Fill NaNs by linear interpolation in time per channel (edges held constant). (N, T, C) -> (N, T, C)."""
    out = hist.clone().numpy()
    times = t_hist.numpy()
    for n in range(out.shape[0]):
        for c in range(out.shape[2]):
            obs = ~np.isnan(out[n, :, c])
            out[n, :, c] = np.interp(times[n], times[n, obs], out[n, obs, c])
    return torch.from_numpy(out)


class GRUDelta(nn.Module):
    """GRU over [value * mask, mask, time gap] that emits the whole horizon at once (a direct forecaster)."""

    def __init__(self, num_channels: int, horizon: int, hidden: int = 64) -> None:
        super().__init__()
        self.gru = nn.GRU(2 * num_channels + 1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, horizon * num_channels)
        self.horizon, self.num_channels = horizon, num_channels

    def forward(self, hist: torch.Tensor, mask: torch.Tensor, t_hist: torch.Tensor) -> torch.Tensor:
        gaps = torch.diff(t_hist, dim=1, prepend=t_hist[:, :1]).unsqueeze(-1)
        feats = torch.cat([torch.nan_to_num(hist) * mask, mask, gaps], -1)
        return self.head(self.gru(feats)[1][-1]).view(-1, self.horizon, self.num_channels)


class NeuralCDE(nn.Module):
    """Neural CDE (Kidger et al. 2020) over the linearly interpolated observed path, via `torchcde`."""

    def __init__(self, num_channels: int, horizon: int, hidden: int = 32) -> None:
        super().__init__()
        self.init = nn.Linear(num_channels + 1, hidden)
        self.func = nn.Sequential(
            nn.Linear(hidden, 64), nn.Softplus(), nn.Linear(64, hidden * (num_channels + 1)), nn.Tanh()
        )
        self.head = nn.Linear(hidden, horizon * num_channels)
        self.hidden, self.num_channels, self.horizon = hidden, num_channels, horizon

    def forward(self, hist: torch.Tensor, mask: torch.Tensor, t_hist: torch.Tensor) -> torch.Tensor:
        import torchcde

        path = torch.cat([t_hist.unsqueeze(-1), hist], -1)  # time as a channel; NaNs mark missing
        spline = torchcde.LinearInterpolation(torchcde.linear_interpolation_coeffs(path))
        z0 = self.init(spline.evaluate(spline.interval[0]))
        field = _Field(self.func, self.hidden, self.num_channels + 1)
        zt = torchcde.cdeint(
            # One RK4 step per observation-grid interval: the path is piecewise linear between grid points,
            # so finer steps only re-sample the same segments (0.25 measured 4x slower).
            X=spline,
            func=field,
            z0=z0,
            t=spline.interval,
            method="rk4",
            options={"step_size": 1.0},
        )
        return self.head(zt[:, -1]).view(-1, self.horizon, self.num_channels)


class _Field(nn.Module):
    def __init__(self, net: nn.Module, hidden: int, channels: int) -> None:
        super().__init__()
        self.net, self.hidden, self.channels = net, hidden, channels

    def forward(self, _t: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.net(z).view(-1, self.hidden, self.channels)


def train_direct(
    model: nn.Module, data: dict, steps: int, lr: float = 3e-3, batch: int = 32, seed: int = 0
) -> nn.Module:
    """Train a direct forecaster (GRUDelta / NeuralCDE) with MSE on the horizon."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = data["hist"].shape[0]
    for _ in range(steps):
        idx = torch.randint(0, n, (batch,), generator=gen)
        pred = model(data["hist"][idx], data["mask"][idx], data["t_hist"][idx])
        loss = (pred - data["target"][idx]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def _fit_predict(model, train: dict, test: dict):
    """Fit one neuralforecast model on the interpolated training histories; its test predictions and the
    (series, channels) counts to unstack them."""
    from neuralforecast import NeuralForecast

    nf = NeuralForecast(models=[model], freq=1)
    nf.fit(_long_frame(interpolate_history(train["hist"], train["t_hist"]), train["target"], "tr"))
    pred = nf.predict(df=_long_frame(interpolate_history(test["hist"], test["t_hist"]), None, "te"))
    n, _, c = test["hist"].shape
    return pred, n, c


def _long_frame(hist: torch.Tensor, target: torch.Tensor | None, prefix: str):
    """neuralforecast's long format: one univariate series per (series, channel), integer time stamps."""
    import pandas as pd

    full = hist if target is None else torch.cat([hist, target], 1)
    n, t, c = full.shape
    ids = np.repeat([f"{prefix}{i}_{j}" for i in range(n) for j in range(c)], t)
    vals = full.permute(0, 2, 1).reshape(-1).numpy()
    return pd.DataFrame({"unique_id": ids, "ds": np.tile(np.arange(t), n * c), "y": vals})


def _unstack(pred, column: str, n: int, h: int, c: int) -> np.ndarray:
    """(N, H, C) array of one forecast column of neuralforecast's output for the `te{i}_{j}` series."""
    out = np.zeros((n, h, c), dtype=np.float32)
    for i in range(n):
        for j in range(c):
            out[i, :, j] = pred.loc[pred["unique_id"] == f"te{i}_{j}", column].to_numpy()
    return out


def ensemble_levels(num_members: int) -> list[float]:
    """Central-interval levels (%) whose bounds are the quantiles (m + 0.5) / S, m = 0 .. S-1 (S even)."""
    if num_members < 2 or num_members % 2:
        raise ValueError(f"`num_members` must be even and >= 2, got {num_members}.")
    return [100.0 * (1 - 2 * (m + 0.5) / num_members) for m in range(num_members // 2)]


def deepar_forecast(
    train: dict, test: dict, max_steps: int, num_members: int = 8, seed: int = 0
) -> torch.Tensor:
    """neuralforecast DeepAR (Gaussian likelihood, LSTM) on linearly interpolated histories, one
    univariate series per channel. Returns an ensemble (S, N, H, C) of its S forecast quantiles at levels
    (m + 0.5) / S, a probabilistic forecast that the ensemble CRPS scores like samples."""
    from neuralforecast.losses.pytorch import DistributionLoss
    from neuralforecast.models import DeepAR

    levels = ensemble_levels(num_members)
    h, history = test["t_query"].shape[1], test["hist"].shape[1]
    model = DeepAR(
        h=h,
        input_size=history,
        lstm_hidden_size=32,
        lstm_n_layers=2,
        windows_batch_size=128,
        loss=DistributionLoss("Normal", level=levels),
        max_steps=max_steps,
        random_seed=seed,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        accelerator="cpu",
    )
    pred, n, c = _fit_predict(model, train, test)
    cols = [f"DeepAR-lo-{lv}" for lv in levels] + [f"DeepAR-hi-{lv}" for lv in reversed(levels)]
    return torch.from_numpy(np.stack([_unstack(pred, col, n, h, c) for col in cols]))


def dlinear_forecast(train: dict, test: dict, max_steps: int, seed: int = 0) -> torch.Tensor:
    """neuralforecast DLinear on linearly interpolated histories, one univariate series per channel."""
    from neuralforecast.models import DLinear

    h, history = test["t_query"].shape[1], test["hist"].shape[1]
    model = DLinear(
        h=h,
        input_size=history,
        max_steps=max_steps,
        random_seed=seed,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        accelerator="cpu",
    )
    pred, n, c = _fit_predict(model, train, test)
    return torch.from_numpy(_unstack(pred, "DLinear", n, h, c))


def saits_impute(
    train_hist: torch.Tensor, test_hist: torch.Tensor, epochs: int, seed: int = 0
) -> torch.Tensor:
    """pypots SAITS trained on the (NaN-marked) training histories, imputing the test histories."""
    from pypots.imputation import SAITS

    torch.manual_seed(seed)
    model = SAITS(
        n_steps=train_hist.shape[1],
        n_features=train_hist.shape[2],
        n_layers=1,
        d_model=32,
        n_heads=2,
        d_k=16,
        d_v=16,
        d_ffn=32,
        epochs=epochs,
        batch_size=32,
        device="cpu",
        verbose=False,
    )
    model.fit({"X": train_hist.numpy()})
    return torch.from_numpy(np.asarray(model.impute({"X": test_hist.numpy()}), dtype=np.float32))
