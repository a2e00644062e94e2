"""Data for the LDM demo: moving-dot videos, a planted linear latent system, ICA mixtures, digit views."""

from __future__ import annotations

import numpy as np
import torch


def dot_motion(
    num_sequences: int, steps: int, size: int = 10, noise: float = 0.1, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames (N, T, size*size) of a Gaussian dot moving on a circle or a square, and positions (N, T, 2).

    Each sequence draws its path (circle or square), phase and angular speed; pixel noise N(0, noise^2).
    A re-implementation of the DotMotion idea from the reference code, not its exact generator.
    """
    if num_sequences < 1 or steps < 2 or size < 4 or noise < 0:
        raise ValueError(
            f"need `num_sequences` >= 1, `steps` >= 2, `size` >= 4, `noise` >= 0; "
            f"got {num_sequences}, {steps}, {size}, {noise}."
        )
    rng = np.random.default_rng(seed)
    center, radius = (size - 1) / 2, (size - 1) * 0.3
    phase = rng.uniform(0, 2 * np.pi, (num_sequences, 1))
    speed = rng.uniform(0.15, 0.35, (num_sequences, 1)) * rng.choice([-1, 1], (num_sequences, 1))
    angle = phase + speed * np.arange(steps)[None, :]  # (N, T)
    pos = np.stack([np.cos(angle), np.sin(angle)], -1)  # circle
    square = rng.random(num_sequences) < 0.5
    pos[square] = pos[square] / np.abs(pos[square]).max(-1, keepdims=True)  # project the circle to a square
    pos = center + radius * pos  # (N, T, 2) in pixel units
    grid = np.arange(size)
    gx = np.exp(-((grid[None, None, :] - pos[..., :1]) ** 2) / (2 * 0.8**2))  # (N, T, size)
    gy = np.exp(-((grid[None, None, :] - pos[..., 1:]) ** 2) / (2 * 0.8**2))
    frames = gy[..., :, None] * gx[..., None, :]  # (N, T, size, size)
    frames = frames + noise * rng.standard_normal(frames.shape)
    return (
        torch.tensor(frames.reshape(num_sequences, steps, size * size), dtype=torch.float32),
        torch.tensor(pos, dtype=torch.float32),
    )


def planted_linear_system(
    num_sequences: int, steps: int, obs_size: int = 8, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Observations (N, T, obs_size) = M s_t + noise of a 2-D damped rotation s_t; returns (x, s)."""
    gen = torch.Generator().manual_seed(seed)
    angle = 0.3
    a = 0.98 * torch.tensor(
        [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]], dtype=torch.float32
    )
    s = torch.zeros(num_sequences, steps, 2)
    s[:, 0] = torch.randn(num_sequences, 2, generator=gen)
    for t in range(1, steps):
        s[:, t] = s[:, t - 1] @ a.T + 0.2 * torch.randn(num_sequences, 2, generator=gen)
    mix = torch.randn(obs_size, 2, generator=gen)
    x = s @ mix.T + 0.05 * torch.randn(num_sequences, steps, obs_size, generator=gen)
    return x, s


def ica_mixture(num_samples: int, num_sources: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, mixing): unit-Laplace sources mixed by a random well-conditioned matrix, x = s @ mixing.T."""
    if num_samples < 2 or num_sources < 2:
        raise ValueError(f"need `num_samples` >= 2 and `num_sources` >= 2, got {num_samples}, {num_sources}.")
    rng = np.random.default_rng(seed)
    sources = rng.laplace(size=(num_samples, num_sources))
    mixing = rng.normal(size=(num_sources, num_sources)) + 2 * np.eye(num_sources)
    return sources @ mixing.T, mixing


def augment_digits(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One random view of 8x8 digits (N, 64): shift by up to 1 pixel, pixel dropout 10%, noise 0.1."""
    imgs = x.view(-1, 8, 8)
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
    imgs = torch.roll(imgs, shifts=(dy, dx), dims=(1, 2))
    keep = (torch.rand(imgs.shape, generator=gen) > 0.1).float()
    return (imgs * keep + 0.1 * torch.randn(imgs.shape, generator=gen)).reshape(-1, 64)
