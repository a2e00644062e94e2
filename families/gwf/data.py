"""2-D targets with known structure: two moons, 8-Gaussian ring, checkerboard (modes are known exactly)."""

from __future__ import annotations

import math

import numpy as np
import torch

TARGETS = ("moons", "ring8", "checkerboard")
RING_RADIUS, RING_STD = 2.0, 0.05


def ring_centers() -> np.ndarray:
    """The 8 mode centres of the ring, (8, 2)."""
    ang = np.arange(8) * 2 * math.pi / 8
    return RING_RADIUS * np.stack([np.cos(ang), np.sin(ang)], 1)


def sample_target(name: str, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """n samples (n, 2) from a named 2-D target; data are centred and of scale ~2."""
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; choose one of {TARGETS}.")
    if n < 1:
        raise ValueError(f"`n` must be >= 1, got {n}.")
    g = generator
    if name == "ring8":
        idx = torch.randint(0, 8, (n,), generator=g)
        c = torch.as_tensor(ring_centers(), dtype=torch.float32)[idx]
        return c + RING_STD * torch.randn(n, 2, generator=g)
    if name == "checkerboard":  # 8 black squares of a 4x4 board on [-2, 2]^2
        col = torch.randint(0, 4, (n,), generator=g)
        row = 2 * torch.randint(0, 2, (n,), generator=g) + (col % 2)
        u = torch.rand(n, 2, generator=g)
        return torch.stack([col + u[:, 0], row + u[:, 1]], 1) - 2.0
    # two moons (same construction as sklearn.datasets.make_moons, noise 0.05), centred and scaled
    t = math.pi * torch.rand(n, generator=g)
    upper = torch.rand(n, generator=g) < 0.5
    x = torch.where(upper, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(upper, torch.sin(t), 0.5 - torch.sin(t))
    pts = torch.stack([x, y], 1) + 0.05 * torch.randn(n, 2, generator=g)
    return 1.5 * (pts - torch.tensor([0.5, 0.25]))


def modes_covered(name: str, x: torch.Tensor, min_share: float = 0.02) -> tuple[int, int, float]:
    """(# modes holding >= min_share of samples, # modes, share of samples that land on any mode)."""
    xs = x.detach().numpy()
    if name == "ring8":
        d = np.linalg.norm(xs[:, None, :] - ring_centers()[None], axis=-1)  # (N, 8)
        hit = d.min(1) < 4 * RING_STD
        lab = d.argmin(1)
        k = 8
    elif name == "checkerboard":
        cell = np.floor(xs + 2.0).astype(int)
        inside = (cell >= 0).all(1) & (cell <= 3).all(1)
        hit = inside & ((cell[:, 1] - cell[:, 0]) % 2 == 0)
        lab = cell[:, 0] * 4 + cell[:, 1]
        k = 8
    else:  # moons: the two arcs; a point "hits" when it lies within 0.25 of its arc
        t = np.linspace(0, math.pi, 400)
        arcs = [np.stack([np.cos(t), np.sin(t)], 1), np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1)]
        arcs = [1.5 * (a - np.array([0.5, 0.25])) for a in arcs]
        d = np.stack([np.linalg.norm(xs[:, None] - a[None], axis=-1).min(1) for a in arcs], 1)
        hit, lab, k = d.min(1) < 0.25, d.argmin(1), 2
    shares = np.array([(hit & (lab == m)).mean() for m in np.unique(lab[hit])]) if hit.any() else np.array([])
    return int((shares >= min_share).sum()), k, float(hit.mean())
