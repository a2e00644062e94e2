"""Peer-library wrappers: POT for Wasserstein distances between particle clouds, torchdiffeq for integration."""

from __future__ import annotations

import numpy as np
import torch

from .config import ParticlesConfig
from .model import Perceptron, Trajectory, simulate


def wasserstein2(x: torch.Tensor, y: torch.Tensor) -> float:
    """Exact W2 between two uniform empirical measures on the sphere (POT `ot.emd2`, squared-Euclidean cost)."""
    import ot

    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(
            f"`x` and `y` must be (N, D) and (M, D) with the same D, got {tuple(x.shape)}, {tuple(y.shape)}."
        )
    if len(x) == 0 or len(y) == 0:
        raise ValueError("`x` and `y` must each hold at least one point.")
    xa, ya = x.detach().double().numpy(), y.detach().double().numpy()
    cost = ot.dist(xa, ya)  # squared Euclidean
    a, b = np.full(len(xa), 1 / len(xa)), np.full(len(ya), 1 / len(ya))
    return float(np.sqrt(max(ot.emd2(a, b, cost), 0.0)))


def simulate_dopri5(x0: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None) -> Trajectory:
    """The same ODE with torchdiffeq's adaptive dopri5 solver (reference for our projected Euler)."""
    from dataclasses import replace

    return simulate(x0, replace(cfg, integrator="dopri5"), perceptron)
