"""The paper's two missing pieces: a latent space (a set-encoder VAE) and a LapFormer-style denoiser.

Pipeline (after the reference code's three stages, written from its description):
1. `SetVAE`: each timestamp's entities [value * mask, mask, entity embedding] are embedded, mean-pooled
   over the observed entities (a set encoder), and mapped to (mu, logvar) in R^Cz; the decoder maps a
   latent back to all entities. Trained first, on every observed point, then frozen.
2. `LapFormerLLapDiff`: the diffusion model of `model.LLapDiff` on latent series, with the modal denoiser
   built from attention: 2K pole tokens (an MLP of (rho, omega, cos/sin id) plus learned embeddings)
   cross-attend to the noisy horizon (keys an MLP of time, values a linear map of the latent) to give
   residues; refinement blocks run self-attention over the modal tokens, cross-attention to summary
   tokens and an MLP, each AdaLN-modulated by the noise-step embedding; the residues are synthesised at
   any timestamps through the damped basis. A least-squares fit of the noisy input is kept as a skip.
3. `LatentLLapDiff`: encode history and horizon, train or sample the latent diffusion (inpainting the
   latents of observed horizon steps for imputation), decode.

Shapes: B batch, T timestamps, C entities, Cz latent channels, K poles, h width.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from .config import LLapDiffConfig
from .diffusion import WeightAverage
from .model import LLapDiff, laplace_basis, solve_residues


class SetVAE(nn.Module):
    """Per-timestamp set encoder over entities -> Gaussian latent (Cz); MLP decoder back to the C entities."""

    def __init__(self, num_channels: int, latent_dim: int = 2, hidden: int = 64) -> None:
        super().__init__()
        self.num_channels, self.latent_dim = num_channels, latent_dim
        self.entity = nn.Parameter(torch.randn(num_channels, hidden) * 0.1)
        self.phi = nn.Sequential(nn.Linear(2 + hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.rho = nn.Sequential(nn.GELU(), nn.Linear(hidden, 2 * latent_dim))
        self.dec = nn.Sequential(nn.Linear(latent_dim, hidden), nn.GELU(), nn.Linear(hidden, num_channels))

    def encode(self, values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """values, mask (B, T, C) -> mu, logvar (B, T, Cz); missing entities are left out of the pool."""
        v = torch.nan_to_num(values) * mask
        ent = self.entity.expand(*v.shape, -1)  # (B, T, C, h)
        tok = self.phi(torch.cat([v.unsqueeze(-1), mask.unsqueeze(-1), ent], -1))
        pooled = (tok * mask.unsqueeze(-1)).sum(2) / mask.sum(2, keepdim=True).clamp_min(1.0)
        mu, logvar = self.rho(pooled).chunk(2, -1)
        return mu, logvar.clamp(-10.0, 5.0)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """(..., Cz) -> (..., C)."""
        return self.dec(z)

    def loss(self, values: torch.Tensor, mask: torch.Tensor, beta: float = 1e-3) -> torch.Tensor:
        """Reconstruction MSE on observed entries plus beta * KL to N(0, I), per observed timestamp."""
        mu, logvar = self.encode(values, mask)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        err = (self.decode(z) - torch.nan_to_num(values)).pow(2) * mask
        rec = err.sum() / mask.sum().clamp_min(1.0)
        seen = mask.amax(-1)  # (B, T): timestamps with at least one observed entity
        kl = (0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(-1) * seen).sum() / seen.sum().clamp_min(1.0)
        return rec + beta * kl


class AdaLN(nn.Module):
    """LayerNorm whose scale and shift come from the step embedding (zero-initialised: plain LN at start)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.mod = nn.Linear(width, 2 * width)
        nn.init.zeros_(self.mod.weight)
        nn.init.zeros_(self.mod.bias)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        scale, shift = self.mod(temb).unsqueeze(1).chunk(2, -1)
        return self.norm(x) * (1 + scale) + shift


class LapFormerBlock(nn.Module):
    """Self-attention over modal tokens, cross-attention to summary tokens, MLP; pre-AdaLN, residual."""

    def __init__(self, width: int, heads: int = 4) -> None:
        super().__init__()
        self.n1, self.n2, self.n3 = AdaLN(width), AdaLN(width), AdaLN(width)
        self.self_attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.n1(x, temb)
        x = x + self.self_attn(h, h, h, need_weights=False)[0]
        x = x + self.cross_attn(self.n2(x, temb), memory, memory, need_weights=False)[0]
        return x + self.mlp(self.n3(x, temb))


class LapFormerLLapDiff(LLapDiff):
    """`LLapDiff` with an attention denoiser: pole-token analysis, LapFormer refinement, basis synthesis."""

    def __init__(self, config: LLapDiffConfig, num_blocks: int = 2, summary_tokens: int = 4) -> None:
        super().__init__(config)
        h, k, c = config.hidden_size, config.num_poles, config.num_channels
        self.summary_tokens = summary_tokens
        self.refine = None  # the MLP refinement of the parent is replaced by the blocks below
        self.pole_embed = nn.Parameter(torch.randn(2 * k, h) * 0.02)
        self.pole_mlp = nn.Sequential(nn.Linear(4, h), nn.GELU(), nn.Linear(h, h))
        self.key_mlp = nn.Sequential(nn.Linear(1, h), nn.GELU(), nn.Linear(h, h))
        self.value_proj = nn.Linear(c, h)
        self.analysis = nn.MultiheadAttention(h, 4, batch_first=True)
        self.to_memory = nn.Linear(h, summary_tokens * h)
        self.blocks = nn.ModuleList(LapFormerBlock(h) for _ in range(num_blocks))
        self.residue_head = nn.Linear(h, c)
        nn.init.zeros_(self.residue_head.weight)  # starts at the least-squares residues
        nn.init.zeros_(self.residue_head.bias)

    def denoise(
        self,
        x_noisy: torch.Tensor,
        t_query: torch.Tensor,
        step: torch.Tensor,
        summary: torch.Tensor,
        t_out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Same contract as `LLapDiff.denoise`; the residues come from the pole tokens."""
        temb = self.step_embedding(step, summary.dtype)
        rho, omega = self.poles_for(summary, temb)  # (B, K)
        basis = laplace_basis(t_query, rho, omega)
        theta0 = solve_residues(basis, x_noisy, ridge=1e-2)  # (B, 2K, C) skip
        k = rho.shape[1]
        kind = torch.cat([torch.zeros(k), torch.ones(k)]).to(rho)  # 0: cos mode, 1: sin mode
        feats = torch.stack([rho.repeat(1, 2), omega.repeat(1, 2), kind.expand_as(rho.repeat(1, 2)),
                             1 - kind.expand_as(rho.repeat(1, 2))], -1)  # fmt: skip
        queries = self.pole_mlp(feats) + self.pole_embed  # (B, 2K, h)
        keys = self.key_mlp(t_query.unsqueeze(-1))  # (B, T, h): irregular times enter here
        tokens = queries + self.analysis(queries, keys, self.value_proj(x_noisy), need_weights=False)[0]
        memory = self.to_memory(summary).view(summary.shape[0], self.summary_tokens, -1)
        for block in self.blocks:
            tokens = block(tokens, memory, temb)
        theta = theta0 + self.residue_head(tokens)
        if t_out is not None:
            basis = laplace_basis(t_out, rho, omega)
        y = basis @ theta
        return y if self.head is None else self.head(y)


class LatentLLapDiff(nn.Module):
    """A frozen SetVAE around a latent LapFormer diffusion: values in, values out."""

    def __init__(self, vae: SetVAE, diffusion: LLapDiff) -> None:
        super().__init__()
        if diffusion.config.num_channels != vae.latent_dim:
            raise ValueError(
                f"the diffusion model's num_channels ({diffusion.config.num_channels}) must equal the VAE's "
                f"latent_dim ({vae.latent_dim})."
            )
        self.vae, self.diffusion = vae, diffusion
        for p in self.vae.parameters():
            p.requires_grad_(False)

    @classmethod
    def build(
        cls, num_channels: int, latent_dim: int = 2, config: LLapDiffConfig | None = None
    ) -> LatentLLapDiff:
        """Fresh VAE and LapFormer diffusion with the given (or default) diffusion settings."""
        cfg = replace(config or LLapDiffConfig(), num_channels=latent_dim)
        return cls(SetVAE(num_channels, latent_dim, cfg.hidden_size), LapFormerLLapDiff(cfg))

    def encode(self, values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent means (B, T, Cz) and a latent mask (a timestamp counts as observed if any entity is)."""
        with torch.no_grad():
            mu, _ = self.vae.encode(values, mask)
        seen = mask.amax(-1, keepdim=True).expand_as(mu).contiguous()
        return torch.where(seen > 0, mu, torch.nan), seen

    def loss(self, hist, mask, t_hist, target, t_query) -> torch.Tensor:  # noqa: ANN001 -- as LLapDiff.loss
        """Diffusion loss on the latents of history and horizon."""
        zh, mh = self.encode(hist, mask)
        zt, _ = self.encode(target, torch.ones_like(target))
        return self.diffusion.loss(zh, mh, t_hist, zt, t_query)

    @torch.no_grad()
    def sample(
        self, hist, mask, t_hist, t_query, num_samples: int = 8, y_obs=None, obs_mask=None
    ) -> torch.Tensor:  # noqa: ANN001
        """Decoded samples (S, B, T_query, C); `y_obs`/`obs_mask` (B, T_query) inpaint observed horizon steps
        in latent space (their latents are reset at every step), and the observed values come back unchanged."""
        zh, mh = self.encode(hist, mask)
        z_obs = None
        if y_obs is not None:
            z_obs, _ = self.encode(y_obs, obs_mask.unsqueeze(-1).expand_as(y_obs).contiguous())
            z_obs = torch.nan_to_num(z_obs)
        z = self.diffusion.sample(zh, mh, t_hist, t_query, num_samples, y_obs=z_obs, obs_mask=obs_mask)
        x = self.vae.decode(z)
        if y_obs is not None:
            keep = obs_mask.bool()[None, ..., None]
            x = torch.where(keep, y_obs.unsqueeze(0), x)
        return x


def train_latent(
    train: dict,
    vae_steps: int,
    steps: int,
    seed: int,
    config: LLapDiffConfig | None = None,
    latent_dim: int = 3,
    ema_decay: float | None = None,
) -> LatentLLapDiff:
    """Stage 1: VAE on every observed point (history and horizon); stage 2: latent diffusion, VAE frozen
    (`ema_decay`: evaluate the moving average of the diffusion weights, as the reference code does)."""
    torch.manual_seed(seed)
    model = LatentLLapDiff.build(train["hist"].shape[-1], latent_dim, config)
    vals = torch.cat([train["hist"], train["target"]], 1)
    msk = torch.cat([train["mask"], torch.ones_like(train["target"])], 1)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.vae.parameters(), lr=3e-3)
    for p in model.vae.parameters():
        p.requires_grad_(True)
    for _ in range(vae_steps):
        idx = torch.randint(0, vals.shape[0], (32,), generator=gen)
        loss = model.vae.loss(vals[idx], msk[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in model.vae.parameters():
        p.requires_grad_(False)
    model.vae.eval()
    opt = torch.optim.Adam(model.diffusion.parameters(), lr=3e-3)
    avg = WeightAverage(model.diffusion, ema_decay) if ema_decay else None
    for _ in range(steps):
        idx = torch.randint(0, train["hist"].shape[0], (32,), generator=gen)
        loss = model.loss(train["hist"][idx], train["mask"][idx], train["t_hist"][idx], train["target"][idx],
                          train["t_query"][idx])  # fmt: skip
        opt.zero_grad()
        loss.backward()
        opt.step()
        if avg:
            avg.update(model.diffusion)
    if avg:
        avg.copy_to(model.diffusion)
    return model


def reconstruction_mae(model: LatentLLapDiff, values: torch.Tensor) -> float:
    """MAE of decode(encode(x)) on fully observed values: how much the latent keeps."""
    with torch.no_grad():
        mu, _ = model.vae.encode(values, torch.ones_like(values))
        return F.l1_loss(model.vae.decode(mu), values).item()
