"""LLapDiff-lite: a modal (Laplace-pole) denoiser for latent diffusion on irregular time series.

Paper: You, Zheng, Cartlidge, "Latent Laplace Diffusion", arXiv 2605.19805 (ICML 2026).
Reference code (read-only, nothing copied): github.com/pixelhero98/LLapDiffusion.

The denoiser represents a horizon as K damped modes with stable complex-conjugate poles s_k = -rho_k +- i w_k,
    y(t) = sum_k e^{-rho_k t} (a_k cos w_k t + b_k sin w_k t),   rho_k = softplus(.) + alpha_min > 0,
    w_k = omega_max * sigmoid(.) in (0, pi),
so it is evaluated directly at any timestamps (no ODE solver). A gap-aware GRU summarises the irregular
history (values * mask, mask, time gaps, time) and conditions the poles (bounded per-sample shifts) and
the residues (a, b); by default the poles also depend on the noise step, and a gated MLP on the synthesis
lets the output leave the span of the basis. Diffusion: DDPM cosine schedule with the reference code's
defaults (v-prediction, min-SNR weights, Karras-spaced DDIM with eta 0, classifier-free guidance); see
`diffusion.py`. Simplifications against the paper (see README): identity latent (no VAE), least-squares
"analysis" instead of pole-token cross-attention, an MLP refinement instead of the LapFormer blocks.

Shapes: B batch, T timestamps, K poles, C channels, S samples.
"""

from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import LLapDiffConfig
from .diffusion import (
    guidance_scale,
    guide,
    karras_step_indices,
    linear_step_indices,
    min_snr_weight,
    v_target,
    x0_from_v,
)

logger = logging.getLogger(__name__)


def laplace_basis(t: torch.Tensor, rho: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Damped-mode basis at arbitrary timestamps: t (B, T), rho/omega (B, K) -> (B, T, 2K) [cos | sin]."""
    if t.dim() != 2 or rho.shape != omega.shape or rho.dim() != 2 or rho.shape[0] != t.shape[0]:
        raise ValueError(
            f"need t (B, T) and rho, omega (B, K); got {tuple(t.shape)}, {tuple(rho.shape)}, {tuple(omega.shape)}."
        )
    if not torch.isfinite(t).all():
        raise ValueError("timestamps contain NaN or inf; pass finite query times.")
    decay = torch.exp(-rho.unsqueeze(1) * t.unsqueeze(-1))  # (B, T, K)
    phase = omega.unsqueeze(1) * t.unsqueeze(-1)
    return torch.cat([decay * torch.cos(phase), decay * torch.sin(phase)], dim=-1)


def solve_residues(basis: torch.Tensor, y: torch.Tensor, ridge: float = 1e-4) -> torch.Tensor:
    """Least-squares residues theta (B, 2K, C) with y ~ basis @ theta (the 'analysis' step)."""
    gram = basis.transpose(1, 2) @ basis  # (B, 2K, 2K)
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return torch.linalg.solve(gram + ridge * eye, basis.transpose(1, 2) @ y)


class PoleBank(nn.Module):
    """K stable pole pairs; optional per-sample shifts, tanh-bounded, in the raw (pre-softplus/sigmoid) space."""

    def __init__(
        self, num_poles: int, alpha_min: float = 1e-3, omega_max: float = math.pi, delta_max: float = 0.5
    ):
        super().__init__()
        self.alpha_min, self.omega_max, self.delta_max = alpha_min, omega_max, delta_max
        self.raw_rho = nn.Parameter(torch.linspace(-3.0, 0.0, num_poles))  # slow to fast decays
        self.raw_omega = nn.Parameter(torch.linspace(-4.0, 2.0, num_poles))  # low to high frequencies

    def forward(self, delta: torch.Tensor | None = None, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """(rho, omega), each (B, K); `delta` (B, 2K) are unbounded per-sample shifts."""
        raw_rho = self.raw_rho.expand(batch, -1)
        raw_omega = self.raw_omega.expand(batch, -1)
        if delta is not None:
            d_rho, d_omega = (self.delta_max * torch.tanh(delta)).chunk(2, dim=-1)
            raw_rho, raw_omega = raw_rho + d_rho, raw_omega + d_omega
        return F.softplus(raw_rho) + self.alpha_min, self.omega_max * torch.sigmoid(raw_omega)


def fit_poles(
    t: torch.Tensor,
    y: torch.Tensor,
    num_poles: int = 1,
    steps: int = 400,
    restarts: int = 6,
    lr: float = 0.05,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Fit poles to one series by variable projection (residues solved in closed form); returns (rho, omega, mse).

    t (T,), y (T, C). Restarts spread the initial frequencies over (0, pi) and keep the best fit.
    """
    if t.dim() != 1 or y.dim() != 2 or y.shape[0] != t.shape[0] or len(t) < 2 * num_poles + 1:
        raise ValueError(f"need t (T,), y (T, C) with T > 2K; got {tuple(t.shape)}, {tuple(y.shape)}.")
    best = (None, None, float("inf"))
    for r in range(restarts):
        bank = PoleBank(num_poles)
        with torch.no_grad():
            bank.raw_omega.copy_(torch.logit(torch.linspace(0.05, 0.95, restarts * num_poles)[r::restarts]))
        opt = torch.optim.Adam(bank.parameters(), lr=lr)
        for _ in range(steps):
            rho, omega = bank()
            basis = laplace_basis(t[None], rho, omega)
            resid = basis @ solve_residues(basis, y[None], ridge=1e-8) - y[None]
            loss = resid.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if loss.item() < best[2]:
            rho, omega = bank()
            best = (rho.detach()[0], omega.detach()[0], loss.item())
    return best


def crps_ensemble(samples: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CRPS of an ensemble (S, ...) against target (...), averaged: E|X - y| - 0.5 E|X - X'|.

    With one sample (a deterministic forecast) the second term is 0 and CRPS equals MAE.
    """
    if samples.shape[1:] != target.shape:
        raise ValueError(
            f"`samples` must be (S, *target.shape), got {tuple(samples.shape)} vs {tuple(target.shape)}."
        )
    skill = (samples - target.unsqueeze(0)).abs().mean()
    spread = (samples.unsqueeze(0) - samples.unsqueeze(1)).abs().mean()
    return skill - 0.5 * spread


class GapAwareSummarizer(nn.Module):
    """GRU over [value * mask, mask, gap since the previous step, time] of the irregular history."""

    def __init__(self, num_channels: int, hidden_size: int) -> None:
        super().__init__()
        self.gru = nn.GRU(2 * num_channels + 2, hidden_size, batch_first=True)

    def forward(self, values: torch.Tensor, mask: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """values, mask (B, T, C); times (B, T) -> summary (B, hidden)."""
        gaps = torch.diff(times, dim=1, prepend=times[:, :1])  # (B, T)
        feats = torch.cat([values * mask, mask, gaps.unsqueeze(-1), times.unsqueeze(-1)], dim=-1)
        return self.gru(feats)[1][-1]


class GatedHead(nn.Module):
    """Pointwise gated MLP on the synthesised values, y + W_out(v * gelu(g)) with [g, v] = W_in(LN(y)),
    so the output can leave the span of the damped-mode basis. Starts near the identity."""

    def __init__(self, num_channels: int, hidden_size: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(num_channels)
        self.inner = nn.Linear(num_channels, 2 * hidden_size)
        self.outer = nn.Linear(hidden_size, num_channels)
        nn.init.normal_(self.outer.weight, std=1e-3)
        nn.init.zeros_(self.outer.bias)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        gate, value = self.inner(self.norm(y)).chunk(2, dim=-1)
        return y + self.outer(value * F.gelu(gate))


class LLapDiff(nn.Module):
    """Conditional diffusion over a horizon whose denoiser is a damped-mode expansion.

    Example:
        >>> model = LLapDiff(LLapDiffConfig(num_channels=2, num_poles=4, hidden_size=16))
        >>> hist, mask, th = torch.randn(3, 20, 2), torch.ones(3, 20, 2), torch.linspace(-2, 0, 20).expand(3, -1)
        >>> model.loss(hist, mask, th, torch.randn(3, 10, 2), torch.linspace(0.1, 1, 10).expand(3, -1)).shape
        torch.Size([])
    """

    def __init__(self, config: LLapDiffConfig) -> None:
        super().__init__()
        self.config = config
        k2c = 2 * config.num_poles * config.num_channels
        h = config.hidden_size
        self.poles = PoleBank(config.num_poles, config.alpha_min, config.omega_max, config.delta_max)
        self.summarizer = GapAwareSummarizer(config.num_channels, h)
        self.pole_head = nn.Linear((2 if config.step_conditioned_poles else 1) * h, 2 * config.num_poles)
        nn.init.zeros_(self.pole_head.weight)
        nn.init.zeros_(self.pole_head.bias)
        self.step_embed = nn.Sequential(nn.Linear(16, h), nn.GELU())
        self.refine = nn.Sequential(nn.Linear(k2c + 2 * h, 2 * h), nn.GELU(), nn.Linear(2 * h, k2c))
        self.head = GatedHead(config.num_channels, h) if config.gated_head else None
        s = torch.linspace(0, 1, config.diffusion_steps + 1)
        abar = torch.cos((s + 0.008) / 1.008 * math.pi / 2) ** 2
        self.register_buffer("alpha_bar", (abar / abar[0]).clamp(1e-5, 1.0)[1:], persistent=False)

    def _check(
        self, hist: torch.Tensor, mask: torch.Tensor, t_hist: torch.Tensor, t_query: torch.Tensor
    ) -> None:
        c = self.config.num_channels
        if (
            hist.dim() != 3
            or hist.shape[-1] != c
            or mask.shape != hist.shape
            or t_hist.shape != hist.shape[:2]
        ):
            raise ValueError(
                f"need history (B, T, {c}), a mask of the same shape and times (B, T); got "
                f"{tuple(hist.shape)}, {tuple(mask.shape)}, {tuple(t_hist.shape)}."
            )
        if t_query.dim() != 2 or t_query.shape[0] != hist.shape[0] or t_query.shape[1] == 0:
            raise ValueError(f"`t_query` must be (B, T_query) with T_query >= 1, got {tuple(t_query.shape)}.")
        if not torch.isfinite(torch.where(mask > 0, hist, 0.0)).all():
            raise ValueError(
                "observed history values contain NaN or inf; mark them missing in `mask` instead."
            )

    def condition(self, hist: torch.Tensor, mask: torch.Tensor, t_hist: torch.Tensor) -> torch.Tensor:
        """History summary (B, hidden); the all-zero summary is the null condition of guidance."""
        return self.summarizer(torch.nan_to_num(hist), mask, t_hist)

    def step_embedding(self, step: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Sinusoidal features of the noise step through a learned layer: (B,) -> (B, hidden)."""
        freqs = torch.exp(torch.linspace(0, -6, 8, device=step.device, dtype=dtype))
        angle = step.to(dtype).unsqueeze(-1) / self.config.diffusion_steps * 1000 * freqs
        return self.step_embed(torch.cat([angle.sin(), angle.cos()], -1))

    def poles_for(self, summary: torch.Tensor, temb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample poles (rho, omega), each (B, K), from the summary and (by default) the step embedding."""
        feats = torch.cat([temb, summary], -1) if self.config.step_conditioned_poles else summary
        return self.poles(self.pole_head(feats), batch=summary.shape[0])

    def denoise(
        self,
        x_noisy: torch.Tensor,
        t_query: torch.Tensor,
        step: torch.Tensor,
        summary: torch.Tensor,
        t_out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Raw prediction (x0 or v, as configured) from a noisy horizon (B, T, C) at `t_query` (B, T) and
        noise level `step` (B,), conditioned on `summary` (B, hidden).

        The noisy points are analysed into residues, which are then synthesised at `t_out` (B, T_out),
        by default `t_query`: any other times can be read off the same denoised expansion.
        """
        temb = self.step_embedding(step, summary.dtype)
        rho, omega = self.poles_for(summary, temb)
        basis = laplace_basis(t_query, rho, omega)  # (B, T, 2K)
        theta0 = solve_residues(basis, x_noisy, ridge=1e-2)  # analysis of the noisy input, (B, 2K, C)
        theta = theta0 + self.refine(torch.cat([theta0.flatten(1), summary, temb], -1)).view_as(theta0)
        if t_out is not None:
            basis = laplace_basis(t_out, rho, omega)  # (B, T_out, 2K)
        y = basis @ theta  # synthesis: evaluated directly at the requested times
        return y if self.head is None else self.head(y)

    def loss(
        self,
        hist: torch.Tensor,
        mask: torch.Tensor,
        t_hist: torch.Tensor,
        target: torch.Tensor,
        t_query: torch.Tensor,
    ) -> torch.Tensor:
        """MSE of the configured target (x0 or v) at a random noise level, optionally min-SNR weighted; a
        `cond_drop_prob` share of the series sees the null condition, which guidance needs."""
        self._check(hist, mask, t_hist, t_query)
        c = self.config
        summary = self.condition(hist, mask, t_hist)
        if c.cond_drop_prob > 0:
            keep = torch.rand(hist.shape[0], 1, device=hist.device) >= c.cond_drop_prob
            summary = summary * keep
        step = torch.randint(0, c.diffusion_steps, (hist.shape[0],), device=hist.device)
        abar = self.alpha_bar[step].view(-1, 1, 1)
        eps = torch.randn_like(target)
        noisy = abar.sqrt() * target + (1 - abar).sqrt() * eps
        out = self.denoise(noisy, t_query, step, summary)
        goal = target if c.prediction == "x0" else v_target(target, eps, abar)
        per_series = (out - goal).pow(2).mean((1, 2))  # (B,)
        if c.loss_weighting == "min_snr":
            per_series = per_series * min_snr_weight(abar.view(-1), c.min_snr_gamma, c.prediction)
        return per_series.mean()

    def sampling_steps(self) -> torch.Tensor:
        """Descending noise-step indices visited by the sampler."""
        c = self.config
        if c.step_spacing == "karras":
            return karras_step_indices(self.alpha_bar.cpu(), c.sampling_steps, c.karras_rho)
        return linear_step_indices(c.diffusion_steps, c.sampling_steps)

    @torch.no_grad()
    def sample(
        self,
        hist: torch.Tensor,
        mask: torch.Tensor,
        t_hist: torch.Tensor,
        t_query: torch.Tensor,
        num_samples: int = 8,
        eta: float | None = None,
        unconditional: bool = False,
        y_obs: torch.Tensor | None = None,
        obs_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Samples (S, B, T_query, C) by DDIM (`eta` defaults to the config's), with guidance as configured.

        `unconditional` samples from the null condition (no guidance). `y_obs` (B, T_query, C) with
        `obs_mask` (B, T_query) inpaints: after every step the observed points are reset to `y_obs` noised
        to the next level, and they are returned exactly.
        """
        self._check(hist, mask, t_hist, t_query)
        if num_samples < 1:
            raise ValueError(f"`num_samples` must be >= 1, got {num_samples}.")
        if (y_obs is None) != (obs_mask is None):
            raise ValueError("inpainting needs both `y_obs` and `obs_mask` (or neither).")
        if y_obs is not None and (
            y_obs.shape != (*t_query.shape, self.config.num_channels) or obs_mask.shape != t_query.shape
        ):
            raise ValueError(
                f"`y_obs` must be (B, T_query, C) and `obs_mask` (B, T_query); got {tuple(y_obs.shape)}, "
                f"{tuple(obs_mask.shape)} for t_query {tuple(t_query.shape)}."
            )
        c = self.config
        eta = c.eta if eta is None else eta
        rep = lambda v: v.repeat_interleave(num_samples, 0)  # noqa: E731
        summary = rep(self.condition(hist, mask, t_hist))
        null = torch.zeros_like(summary)
        if unconditional:
            summary = null
        guided = c.guided and not unconditional
        tq = rep(t_query)
        b = tq.shape[0]
        obs = free = target = None
        if y_obs is not None:
            obs = rep(obs_mask).unsqueeze(-1).to(tq.dtype)
            free = 1 - obs
            target = torch.nan_to_num(rep(y_obs))
        steps = self.sampling_steps()
        x = torch.randn(b, tq.shape[1], c.num_channels, device=hist.device)
        for i, s in enumerate(steps):
            a_s = self.alpha_bar[s]
            if obs is not None:  # observed points sit at the current noise level
                x = obs * (a_s.sqrt() * target + (1 - a_s).sqrt() * torch.randn_like(x)) + free * x
            step = s.expand(b)
            pred = self.denoise(x, tq, step, summary)
            if guided:
                g = guidance_scale(a_s, c.guidance_min, c.guidance_max, c.guidance_power)
                pred = guide(pred, self.denoise(x, tq, step, null), g, c.guidance_rescale, free)
            x0 = x0_from_v(x, pred, a_s) if c.prediction == "v" else pred
            if i == len(steps) - 1:
                x = x0
                break
            a_next = self.alpha_bar[steps[i + 1]]
            eps = (x - a_s.sqrt() * x0) / (1 - a_s).sqrt()
            sigma = eta * ((1 - a_next) / (1 - a_s)).sqrt() * (1 - a_s / a_next).clamp(min=0).sqrt()
            x = (
                a_next.sqrt() * x0
                + (1 - a_next - sigma**2).clamp(min=0).sqrt() * eps
                + sigma * torch.randn_like(x)
            )
        if obs is not None:
            x = obs * target + free * x
        # repeat_interleave put sample s of series b at row b * S + s
        return x.view(t_query.shape[0], num_samples, *x.shape[1:]).transpose(0, 1)
