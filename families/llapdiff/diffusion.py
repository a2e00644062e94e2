"""Diffusion pieces of LLapDiff that do not depend on the denoiser: targets, loss weights, the sampling
step schedule and classifier-free guidance. Each is a small formula, kept apart so it can be tested
against its definition.

The settings follow the reference code's defaults (github.com/pixelhero98/LLapDiffusion, read-only):
v-prediction, min-SNR-gamma weights with gamma 5, 64 DDIM steps spaced on a Karras sigma grid (rho 7.5),
eta 0, and guidance that grows from 1 at high noise to 2 at low noise, rescaled to the conditional
prediction's statistics.
"""

from __future__ import annotations

import torch


def v_target(x0: torch.Tensor, eps: torch.Tensor, abar: torch.Tensor) -> torch.Tensor:
    """v = sqrt(abar) eps - sqrt(1 - abar) x0 (Salimans & Ho), the reference code's default target."""
    return abar.sqrt() * eps - (1 - abar).sqrt() * x0


def x0_from_v(x_noisy: torch.Tensor, v: torch.Tensor, abar: torch.Tensor) -> torch.Tensor:
    """Invert x_t = sqrt(abar) x0 + sqrt(1 - abar) eps given v: x0 = sqrt(abar) x_t - sqrt(1 - abar) v."""
    return abar.sqrt() * x_noisy - (1 - abar).sqrt() * v


def min_snr_weight(abar: torch.Tensor, gamma: float, prediction: str) -> torch.Tensor:
    """Min-SNR-gamma loss weight (Hang et al. 2023) expressed for the x0 or v target:
    min(SNR, gamma) for x0, min(SNR, gamma) / (SNR + 1) for v, with SNR = abar / (1 - abar)."""
    snr = abar / (1 - abar)
    clipped = snr.clamp(max=gamma)
    return clipped if prediction == "x0" else clipped / (snr + 1)


def karras_step_indices(alpha_bar: torch.Tensor, num_steps: int, rho: float = 7.5) -> torch.Tensor:
    """Descending training-step indices whose noise levels sigma = sqrt((1 - abar) / abar) lie nearest a
    Karras et al. (2022) grid (sigma_max^(1/rho) -> sigma_min^(1/rho), linear, then ^rho), skipping step 0.

    The grid crowds the steps at low noise; duplicates are dropped, so fewer than `num_steps` may remain.
    """
    sigma = ((1 - alpha_bar) / alpha_bar).sqrt()
    lo, hi = sigma[1].item() ** (1 / rho), sigma[-1].item() ** (1 / rho)
    grid = (hi + torch.linspace(0, 1, num_steps, dtype=sigma.dtype) * (lo - hi)) ** rho
    nearest = (sigma[1:].unsqueeze(0) - grid.unsqueeze(1)).abs().argmin(1) + 1  # never step 0
    return torch.unique(nearest).flip(0)


def linear_step_indices(diffusion_steps: int, num_steps: int) -> torch.Tensor:
    """Evenly spaced descending step indices from T - 1 to 0 (the earlier default of this family)."""
    return torch.linspace(diffusion_steps - 1, 0, num_steps).long()


def guidance_scale(abar: torch.Tensor, g_min: float, g_max: float, power: float) -> torch.Tensor:
    """Scheduled guidance strength g = g_min + (g_max - g_min) abar^power: weak at high noise."""
    return g_min + (g_max - g_min) * abar**power


def guide(
    cond: torch.Tensor,
    uncond: torch.Tensor,
    g: torch.Tensor,
    rescale: bool = True,
    free: torch.Tensor | None = None,
) -> torch.Tensor:
    """Classifier-free guidance u + g (c - u) on (B, T, C) predictions, g broadcastable to (B, 1, 1).

    `rescale` matches each guided sample's mean and std (over time and channels) to the conditional one,
    which keeps strong guidance from inflating the scale. `free` (B, T, 1), 1 where values are unknown,
    limits guidance to those points when inpainting (g is 1 at observed points).
    """
    if free is not None:
        g = 1 + (g - 1) * free
    out = uncond + g * (cond - uncond)
    if not rescale:
        return out
    dims = (1, 2)
    std_c = cond.std(dims, keepdim=True).clamp(min=1e-6)
    std_o = out.std(dims, keepdim=True).clamp(min=1e-6)
    return (out - out.mean(dims, keepdim=True)) / std_o * std_c + cond.mean(dims, keepdim=True)


class WeightAverage:
    """Exponential moving average of a module's weights, as the reference code evaluates its denoiser.

    The decay warms up as min(decay, (1 + t) / (10 + t)) so the average is not anchored to the
    initial weights in a short run; `copy_to` writes the average into the module for evaluation.
    """

    def __init__(self, module: torch.nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"`decay` must lie in (0, 1), got {decay}.")
        self.decay, self.steps = decay, 0
        self.shadow = {k: v.detach().clone() for k, v in module.state_dict().items()}

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        d = min(self.decay, (1 + self.steps) / (10 + self.steps))
        self.steps += 1
        for k, v in module.state_dict().items():
            if v.dtype.is_floating_point:
                self.shadow[k].mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                self.shadow[k].copy_(v)

    def copy_to(self, module: torch.nn.Module) -> None:
        module.load_state_dict(self.shadow)
