"""A return model fit on the offline data alone: Q_beta(o_i, a_i) ~ discounted team return-to-go.

This is the offline substitute for replaying states in a simulator. Each agent-step of the dataset is a
regression sample (local-observation features + one-hot action -> Monte-Carlo discounted return-to-go of the
team reward in that episode), so the model estimates the behaviour policy's action value from logged data
only. GRPO's return reward reads it as an advantage, Q(o, a) - mean of Q over the legal actions.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from finetune.dlm.baselines import features
from finetune.dlm.dialogue import action_names

__all__ = ["ReturnModel", "fit_return_model", "returns_to_go"]

logger = logging.getLogger(__name__)


def returns_to_go(rows, gamma: float) -> list[float]:
    """Discounted team return-to-go of every step row (rows grouped by episode and ordered by time)."""
    out = [0.0] * len(rows)
    episodes: dict[tuple, list[int]] = {}
    for k, row in enumerate(rows):
        episodes.setdefault((row["env"], row["scenario"], row["tier"], row["episode"]), []).append(k)
    for idx in episodes.values():
        idx.sort(key=lambda k: rows[k]["t"])
        g = 0.0
        for k in reversed(idx):
            g = float(rows[k]["team_reward"]) + gamma * g
            out[k] = g
    return out


class ReturnModel:
    """Q(o_i, a_i) as an MLP over `features(obs, legal)` + one-hot action; scales its advantage by `scale`."""

    def __init__(self, env_name: str, net: nn.Module, scale: float) -> None:
        self.env_name, self.net, self.scale = env_name, net, float(scale)
        self.n_act = len(action_names(env_name))

    def _inputs(self, obs: dict[str, Any], legal: list[int]) -> torch.Tensor:
        x = torch.tensor(features(self.env_name, obs, legal), dtype=torch.float32)
        eye = torch.eye(self.n_act)
        return torch.cat([x.expand(self.n_act, -1), eye], dim=1)  # (A, d + A): every action of this state

    @torch.no_grad()
    def q_values(self, obs: dict[str, Any], legal: list[int]) -> np.ndarray:
        """Q(o, a) for every action of the environment at this observation (illegal ones included)."""
        return self.net(self._inputs(obs, legal)).squeeze(-1).numpy()

    def advantage(self, obs: dict[str, Any], legal: list[int], action: int) -> float:
        """(Q(o, a) - mean over legal a' of Q(o, a')) / scale: > 0 when the data says `a` beats a legal average."""
        q = self.q_values(obs, legal)
        return float((q[action] - q[list(legal)].mean()) / self.scale)

    def save(self, path: str | Path) -> None:
        """Save the network weights, environment name and scale to `path`."""
        torch.save({"env": self.env_name, "state": self.net.state_dict(), "scale": self.scale}, str(path))

    @classmethod
    def load(cls, path: str | Path, hidden: int = 64) -> ReturnModel:
        """A return model saved by `save`; `hidden` must match the width it was trained with."""
        blob = torch.load(str(path), weights_only=True)
        net = _net(blob["state"]["0.weight"].shape[1], hidden)
        net.load_state_dict(blob["state"])
        return cls(blob["env"], net.eval(), blob["scale"])


def _net(d_in: int, hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
    )


def fit_return_model(
    env_name: str, rows, gamma: float = 0.95, epochs: int = 20, hidden: int = 64, seed: int = 0
) -> tuple[ReturnModel, dict[str, float]]:
    """Regress discounted return-to-go on (local observation, own action) over every agent-step of `rows`."""
    rows = list(rows)
    if not rows:
        raise ValueError("no offline rows to fit the return model on.")
    torch.manual_seed(seed)
    n_act = len(action_names(env_name))
    g = returns_to_go(rows, gamma)
    xs, ys = [], []
    for row, target in zip(rows, g):
        for o, lg, a in zip(row["obs"], row["legal"], row["actions"]):
            onehot = [0.0] * n_act
            onehot[int(a)] = 1.0
            xs.append(features(env_name, json.loads(o), lg) + onehot)
            ys.append(target)
    x = torch.tensor(np.array(xs, dtype=np.float32))
    y = torch.tensor(ys, dtype=torch.float32)
    net = _net(x.shape[1], hidden)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    perm = torch.randperm(len(x))
    n_val = max(1, len(x) // 10)
    val, tr = perm[:n_val], perm[n_val:]
    for _ in range(epochs):
        for idx in tr[torch.randperm(len(tr))].split(256):
            loss = nn.functional.mse_loss(net(x[idx]).squeeze(-1), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        val_mse = float(nn.functional.mse_loss(net(x[val]).squeeze(-1), y[val]))
    var = float(y[val].var()) if n_val > 1 else float("nan")
    scale = max(float(y.std()), 1e-3)
    stats = {"samples": len(x), "val_mse": val_mse, "val_target_var": var, "scale": scale, "gamma": gamma}
    logger.info("return model: %s", stats)
    return ReturnModel(env_name, net.eval(), scale), stats
