"""Generative Wasserstein Flows: generator training as a parametric JKO scheme.

Paper: Caucheteux, Bonet, Korba, "A Unifying View of Variational Generative Wasserstein Flows",
arXiv 2605.31369 (ICML 2026). No reference code is public; the step below is the one the paper's
abstract and the issue state, and the choices where the public text is silent are in README.md.

One JKO step for F(mu) = D(mu || nu), mu = (g_theta)#p_z:
    theta_{k+1} = argmin_theta F((g_theta)#p_z) + 1/(2 tau) E_z || g_theta(z) - g_{theta_k}(z) ||^2.
F is replaced by its first variation h_k = dF/dmu at mu_k (an f-GAN critic f'(dmu/dnu), a WGAN-GP
critic, or the closed-form MMD^2 witness), which turns the step into minimising E_z h_k(g_theta(z)) + prox.
The particle form moves y = g_k(z) - tau grad h_k(g_k(z)) and regresses g_theta(z) onto y. tau = 0 is
the plain GAN step (critic, then one generator step on E h(g(z))), the tau -> 0 limit of the scheme.

Letters: B = batch, D = data dimension, Z = latent dimension.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch
from torch import nn

from .config import GWFConfig

logger = logging.getLogger(__name__)


def mlp(d_in: int, d_out: int, hidden: int, layers: int) -> nn.Sequential:
    """A plain ReLU MLP used for both generator and critic."""
    dims = [d_in] + [hidden] * layers
    mods: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:]):
        mods += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(dims[-1], d_out))


# --- f-divergences in f-GAN form: D_f(mu||nu) = sup_T E_mu[T] - E_nu[f*(T)], T = out_act(v) -------------------
# The optimal T is f'(dmu/dnu), the first variation of F(mu) = D_f(mu||nu).
F_DIVERGENCES: dict[
    str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]
] = {
    # f(u) = u log u: KL(mu||nu); f*(t) = exp(t - 1); T unrestricted.
    "kl": (lambda v: v, lambda t: torch.exp(t - 1)),
    # f(u) = -log u: KL(nu||mu); f*(t) = -1 - log(-t) on t < 0; T = -exp(v).
    "rkl": (lambda v: -torch.exp(v), lambda t: -1 - torch.log(-t)),
    # f(u) = u log u - (u + 1) log((u + 1) / 2): Jensen-Shannon (x2); f*(t) = -log(2 - e^t); T < log 2.
    "js": (lambda v: math.log(2.0) - nn.functional.softplus(-v), lambda t: -torch.log(2 - torch.exp(t))),
}


def gaussian_kernel(x: torch.Tensor, y: torch.Tensor, bandwidths: tuple[float, ...]) -> torch.Tensor:
    """Mixture of Gaussian kernels sum_s exp(-|x-y|^2 / (2 s^2)); (B, D), (M, D) -> (B, M)."""
    d2 = torch.cdist(x, y).pow(2)
    return sum(torch.exp(-d2 / (2 * s * s)) for s in bandwidths)


def mmd2(x: torch.Tensor, y: torch.Tensor, bandwidths: tuple[float, ...]) -> torch.Tensor:
    """Squared MMD (biased V-statistic) between samples x (B, D) and y (M, D)."""
    return (
        gaussian_kernel(x, x, bandwidths).mean()
        - 2 * gaussian_kernel(x, y, bandwidths).mean()
        + gaussian_kernel(y, y, bandwidths).mean()
    )


def mmd_witness_grad(
    points: torch.Tensor, x: torch.Tensor, y: torch.Tensor, bandwidths: tuple[float, ...]
) -> torch.Tensor:
    """Closed-form gradient of the MMD^2 first variation w(p) = 2 E_mu k(p, X) - 2 E_nu k(p, Y) at `points`.

    With grad_p k(p, q) = -(p - q)/s^2 k_s(p, q). For points = x this is B * grad_x MMD^2(x, y). (P, D).
    """

    def field(q: torch.Tensor) -> torch.Tensor:
        diff = points[:, None, :] - q[None, :, :]  # (P, M, D)
        d2 = diff.pow(2).sum(-1, keepdim=True)
        g = sum(-diff / (s * s) * torch.exp(-d2 / (2 * s * s)) for s in bandwidths)
        return g.mean(1)

    return 2 * field(x) - 2 * field(y)


class WassersteinFlowTrainer:
    """Train a generator g_theta: z -> x by JKO steps of the Wasserstein gradient flow of F.

    Example:
        >>> trainer = WassersteinFlowTrainer("mmd", tau=0.1)
        >>> target = torch.randn(512, 2) + 3.0
        >>> logs = trainer.train(lambda n: target[torch.randint(0, 512, (n,))], steps=2)
        >>> trainer.sample(4).shape
        torch.Size([4, 2])
    """

    def __init__(self, objective: str = "mmd", tau: float = 0.1, config: GWFConfig | None = None,
                 generator: nn.Module | None = None, seed: int = 0) -> None:  # fmt: skip
        base = config or GWFConfig()
        self.cfg = GWFConfig(**{**base.__dict__, "objective": objective, "tau": tau})
        c = self.cfg
        torch.manual_seed(seed)
        self.generator = generator or mlp(c.latent_dim, c.data_dim, c.hidden_size, c.num_hidden_layers)
        self.critic = mlp(c.data_dim, 1, c.hidden_size, c.num_hidden_layers) if c.objective != "mmd" else None
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=c.lr_generator, betas=(0.5, 0.9))
        self.opt_c = (torch.optim.Adam(self.critic.parameters(), lr=c.lr_critic, betas=(0.5, 0.9))
                      if self.critic is not None else None)  # fmt: skip
        self.gen = torch.Generator().manual_seed(seed)

    # ----- first variation h = dF/dmu -------------------------------------------------------------------
    def first_variation(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """h(x) at points x (B, D) -> (B,). For MMD the witness needs the target batch y; for critics it is T(x)."""
        c = self.cfg
        if c.objective == "mmd":
            if y is None:
                raise ValueError("the MMD witness needs the target batch `y`.")
            with torch.no_grad():
                xs = self.generator(self._z(c.batch_size))
            return 2 * gaussian_kernel(x, xs, c.bandwidths).mean(1) - 2 * gaussian_kernel(
                x, y, c.bandwidths
            ).mean(1)
        v = self.critic(x).squeeze(-1)
        return F_DIVERGENCES[c.objective][0](v) if c.objective in F_DIVERGENCES else v

    def _z(self, n: int) -> torch.Tensor:
        return torch.randn(n, self.cfg.latent_dim, generator=self.gen)

    def critic_step(self, y: torch.Tensor) -> float:
        """One ascent step on the variational (dual) estimate of F; returns the estimate."""
        c = self.cfg
        with torch.no_grad():
            x = self.generator(self._z(c.batch_size))
        vx, vy = self.critic(x).squeeze(-1), self.critic(y).squeeze(-1)
        if c.objective in F_DIVERGENCES:
            act, conj = F_DIVERGENCES[c.objective]
            est = act(vx).mean() - conj(act(vy)).mean()
            loss = -est
        else:  # w1: sup over 1-Lipschitz h of E_mu h - E_nu h, Lipschitz via gradient penalty (Gulrajani et al.)
            est = vx.mean() - vy.mean()
            eps = torch.rand(len(x), 1, generator=self.gen)
            xi = (eps * x + (1 - eps) * y[: len(x)]).requires_grad_(True)
            (gi,) = torch.autograd.grad(self.critic(xi).sum(), xi, create_graph=True)
            loss = -est + c.gp_weight * (gi.norm(dim=-1) - 1).pow(2).mean()
        self.opt_c.zero_grad()
        loss.backward()
        self.opt_c.step()
        return float(est.detach())

    def _linear_objective(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """F at the generator's samples x: exact MMD^2, or the critic's first-variation linearisation E h(x)."""
        if self.cfg.objective == "mmd":
            return mmd2(x, y, self.cfg.bandwidths)
        return self.first_variation(x).mean()

    def jko_step(self, y: torch.Tensor) -> dict[str, float]:
        """Critic updates, then one parametric JKO step (or one plain GAN step when tau = 0)."""
        c = self.cfg
        if y.ndim != 2 or y.shape[1] != c.data_dim or len(y) == 0:
            raise ValueError(f"target batch must be (B, {c.data_dim}) with B >= 1, got {tuple(y.shape)}.")
        if not torch.isfinite(y).all():
            raise ValueError("target batch contains NaN or inf.")
        est = [self.critic_step(y) for _ in range(c.critic_steps)] if self.critic is not None else []
        z = self._z(c.batch_size)
        with torch.no_grad():
            x_k = self.generator(z)  # (B, D) anchor of the proximal term
        if c.tau == 0:  # GAN limit: one generator step on the (linearised) objective, no proximity control
            loss = self._linear_objective(self.generator(self._z(c.batch_size)), y)
            self.opt_g.zero_grad()
            loss.backward()
            self.opt_g.step()
            return {"objective": loss.item(), "critic": est[-1] if est else float("nan"), "move": 0.0}
        if c.form == "particle":
            x_req = x_k.clone().requires_grad_(True)
            if c.objective == "mmd":
                grad = mmd_witness_grad(x_k, x_k, y, c.bandwidths)
            else:
                (grad,) = torch.autograd.grad(self.first_variation(x_req).sum(), x_req)
            target = (x_k - c.tau * grad).detach()  # particles moved along -grad h
        for _ in range(c.inner_steps):
            x = self.generator(z)
            if c.form == "particle":
                loss = (x - target).pow(2).sum(-1).mean()
            else:
                loss = self._linear_objective(x, y) + (x - x_k).pow(2).sum(-1).mean() / (2 * c.tau)
            self.opt_g.zero_grad()
            loss.backward()
            self.opt_g.step()
        with torch.no_grad():
            move = float((self.generator(z) - x_k).pow(2).sum(-1).mean())  # coupling W2^2 of the step
        return {"objective": loss.item(), "critic": est[-1] if est else float("nan"), "move": move}

    def train(self, sample_target: Callable[[int], torch.Tensor], steps: int) -> list[dict[str, float]]:
        """Run `steps` JKO steps, drawing a fresh target batch each time; returns the per-step logs."""
        if steps < 1:
            raise ValueError(f"`steps` must be >= 1, got {steps}.")
        return [self.jko_step(sample_target(self.cfg.batch_size)) for _ in range(steps)]

    @torch.no_grad()
    def sample(self, n: int) -> torch.Tensor:
        """n generator samples, (n, D)."""
        return self.generator(self._z(n))
