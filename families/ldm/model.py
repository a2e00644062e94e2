"""Self-supervised learning as latent distribution matching (LDM): one loss API and KalmanSSL.

Paper: Mikulasch, Zenke, "Understanding self-supervised learning via latent distribution matching",
arXiv 2605.03517. Reference code (read-only): github.com/fmi-basel/latent_distribution_matching.

The objective is F = <log p(z | z_c)>_q (alignment under an assumed latent model) + H_q[z] (latent
entropy); the loss is -F. Choosing the latent model and the entropy estimator recovers known methods:
    Gaussian p(z|z_c) + VICReg variance/covariance surrogate  -> VICReg
    Gaussian p(z|z_c) + 0.5 log det Cov                       -> the paper's "Gaussian + log-det" SSL
    von Mises-Fisher p + leave-one-out KDE entropy             -> SimCLR / NT-Xent (InfoNCE)
    predictor + cosine (vMF) p + stop-gradient target          -> BYOL / SimSiam
    factorised Laplace prior on z = W x + log|det W|           -> maximum-likelihood ICA
KalmanSSL: encoder pseudo-observations zhat_t, a linear-Gaussian state model and the closed-form Kalman
filter inside the graph; the alignment term is the filter's one-step predictive Gaussian log-likelihood.

Shapes: N batch, T time, L pseudo-observation size, D state size.
"""

from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ENTROPIES, LATENT_MODELS, KalmanSSLConfig

logger = logging.getLogger(__name__)


def _check_views(z1: torch.Tensor, z2: torch.Tensor) -> None:
    if z1.dim() != 2 or z1.shape != z2.shape:
        raise ValueError(
            f"views must both be (N, K) with the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}."
        )
    if z1.shape[0] < 2:
        raise ValueError("need a batch of at least 2 samples: the entropy terms are batch statistics.")
    if not (torch.isfinite(z1).all() and torch.isfinite(z2).all()):
        raise ValueError("latents contain NaN or inf; check the encoder and the learning rate.")


def logdet_entropy(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Gaussian entropy estimate 0.5 log det Cov(z) (constants dropped): the principled LDM uniformity term."""
    zc = z - z.mean(0)
    cov = zc.T @ zc / (z.shape[0] - 1)
    return 0.5 * torch.logdet(cov + eps * torch.eye(z.shape[1], device=z.device, dtype=z.dtype))


def vicreg_entropy(z: torch.Tensor, variance: float, covariance: float, eps: float = 1e-4) -> torch.Tensor:
    """VICReg's surrogate for entropy: -(mu * hinge on std/2 + nu * off-diagonal covariance^2 / K)."""
    std = torch.sqrt(z.var(dim=0) + eps)
    zc = z - z.mean(0)
    cov = zc.T @ zc / (z.shape[0] - 1)
    off = cov - torch.diag(torch.diag(cov))
    return -(variance * F.relu(1 - std).mean() / 2 + covariance * off.pow(2).sum() / z.shape[1])


class LDM:
    """Loss = -(alignment under `latent_model` + entropy by `entropy`), for two views (N, K).

    Example:
        >>> loss = LDM.simclr(temperature=0.5)(torch.randn(8, 4), torch.randn(8, 4))
        >>> loss.shape
        torch.Size([])
    """

    def __init__(self, latent_model: str, entropy: str, **hparams: float) -> None:
        if latent_model not in LATENT_MODELS:
            raise ValueError(f"`latent_model` must be one of {LATENT_MODELS}, got {latent_model!r}.")
        if entropy not in ENTROPIES:
            raise ValueError(f"`entropy` must be one of {ENTROPIES}, got {entropy!r}.")
        pairs = {
            ("gaussian", "vicreg"),
            ("gaussian", "logdet"),
            ("vmf", "kde"),
            ("predictor_cosine", "stopgrad"),
        }
        if (latent_model, entropy) not in pairs:
            raise ValueError(f"unsupported pair ({latent_model!r}, {entropy!r}); supported: {sorted(pairs)}.")
        for key, value in hparams.items():
            if not value > 0:
                raise ValueError(f"hyper-parameter `{key}` must be > 0, got {value}.")
        self.latent_model, self.entropy, self.hparams = latent_model, entropy, hparams

    # Named instances -----------------------------------------------------------------------------
    @classmethod
    def vicreg(cls, invariance: float = 25.0, variance: float = 25.0, covariance: float = 1.0) -> LDM:
        """Gaussian latent model (precision = invariance weight) + VICReg's variance/covariance entropy."""
        return cls("gaussian", "vicreg", precision=invariance, variance=variance, covariance=covariance)

    @classmethod
    def gauss_logdet(cls, precision: float = 1.0) -> LDM:
        """Gaussian latent model + log-det entropy (the paper's principled Gaussian instance)."""
        return cls("gaussian", "logdet", precision=precision)

    @classmethod
    def simclr(cls, temperature: float = 0.5) -> LDM:
        """von Mises-Fisher latent model (kappa = 1/temperature) + leave-one-out KDE entropy = NT-Xent."""
        return cls("vmf", "kde", temperature=temperature)

    @classmethod
    def byol(cls) -> LDM:
        """Predictor + cosine latent model with a stop-gradient target in place of the entropy term."""
        return cls("predictor_cosine", "stopgrad")

    # Loss ------------------------------------------------------------------------------------------
    def __call__(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """Scalar loss. For `byol`, z1 is the predictor output p(z_1) and z2 the target-branch latent."""
        _check_views(z1, z2)
        return -(self.alignment(z1, z2) + self.entropy_term(z1, z2))

    def alignment(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """<log p(z_2 | z_1)> up to additive constants."""
        if self.latent_model == "gaussian":
            return -self.hparams["precision"] * (z1 - z2).pow(2).mean()
        if self.latent_model == "vmf":
            sims = self._similarities(z1, z2)
            n = z1.shape[0]
            pos = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z1.device)
            return sims[torch.arange(2 * n, device=z1.device), pos].mean()
        # predictor_cosine: the target branch is a stop-gradient
        return 2 * F.cosine_similarity(z1, z2.detach(), dim=-1).mean() - 2

    def entropy_term(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """Estimate of H[z] (up to constants) from the batch."""
        if self.entropy == "vicreg":
            hp = self.hparams
            return vicreg_entropy(z1, hp["variance"], hp["covariance"]) + vicreg_entropy(
                z2, hp["variance"], hp["covariance"]
            )
        if self.entropy == "logdet":
            return 0.5 * (logdet_entropy(z1) + logdet_entropy(z2))
        if self.entropy == "kde":
            sims = self._similarities(z1, z2)
            sims = sims.masked_fill(
                torch.eye(sims.shape[0], dtype=torch.bool, device=sims.device), float("-inf")
            )
            return -torch.logsumexp(sims, dim=1).mean()  # leave-one-out kernel density over both views
        return z1.new_zeros(())  # stopgrad: no explicit entropy term

    def _similarities(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        z = F.normalize(torch.cat([z1, z2]), dim=-1)  # (2N, K) on the sphere
        return z @ z.T / self.hparams["temperature"]


def ica_loss(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """LDM for ICA: -( <log Laplace(W x)> + log|det W| ), the negative log-likelihood per sample.

    The linear encoder's entropy H[Wx] = H[x] + log|det W|, so the entropy term is exact here.
    """
    if (
        weight.dim() != 2
        or weight.shape[0] != weight.shape[1]
        or x.dim() != 2
        or x.shape[1] != weight.shape[1]
    ):
        raise ValueError(
            f"need a square `weight` (K, K) and `x` (N, K), got {tuple(weight.shape)}, {tuple(x.shape)}."
        )
    s = x @ weight.T  # (N, K)
    log_prior = (-s.abs() - math.log(2.0)).sum(-1).mean()  # unit Laplace sources
    return -(log_prior + torch.linalg.slogdet(weight)[1])


def kalman_filter(
    obs: torch.Tensor,
    transition: torch.Tensor,
    offset: torch.Tensor,
    observation: torch.Tensor,
    transition_cov: torch.Tensor,
    observation_cov: torch.Tensor,
    initial_mean: torch.Tensor,
    initial_cov: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Differentiable Kalman filter (pykalman's convention: the first observation updates the prior).

    s_t = A s_{t-1} + offset + N(0, Q),  y_t = C s_t + N(0, R).  obs (N, T, L) -> filtered means (N, T, D),
    predicted means (N, T, D), predicted observation means (N, T, L), covariances S_t (T, L, L) and
    per-step predictive log-likelihoods (N, T).
    """
    if obs.dim() != 3 or obs.shape[-1] != observation.shape[0]:
        raise ValueError(f"`obs` must be (N, T, {observation.shape[0]}), got {tuple(obs.shape)}.")
    if not torch.isfinite(obs).all():
        raise ValueError("`obs` contains NaN or inf; the filter needs complete observations.")
    n, steps, _ = obs.shape
    mean = initial_mean.expand(n, -1)
    cov = initial_cov
    eye = torch.eye(cov.shape[0], dtype=obs.dtype, device=obs.device)
    out = {k: [] for k in ("filtered_mean", "predicted_mean", "obs_mean", "obs_cov", "loglik")}
    for t in range(steps):
        if t > 0:  # predict
            mean = mean @ transition.T + offset
            cov = transition @ cov @ transition.T + transition_cov
        y_mean = mean @ observation.T  # (N, L)
        s_cov = observation @ cov @ observation.T + observation_cov  # (L, L)
        s_cov = 0.5 * (s_cov + s_cov.T)
        dist = torch.distributions.MultivariateNormal(y_mean, covariance_matrix=s_cov)
        out["loglik"].append(dist.log_prob(obs[:, t]))
        out["predicted_mean"].append(mean)
        out["obs_mean"].append(y_mean)
        out["obs_cov"].append(s_cov)
        gain = torch.linalg.solve(s_cov, observation @ cov).T  # K = P C^T S^-1, (D, L)
        mean = mean + (obs[:, t] - y_mean) @ gain.T  # update
        cov = (eye - gain @ observation) @ cov
        cov = 0.5 * (cov + cov.T)
        out["filtered_mean"].append(mean)
    stacked = {k: torch.stack(v, dim=1 if k != "obs_cov" else 0) for k, v in out.items()}
    return stacked


class KalmanSSL(nn.Module):
    """Encoder pseudo-observations + learned linear-Gaussian state model, trained sampling-free.

    Example:
        >>> model = KalmanSSL(KalmanSSLConfig(input_size=16, latent_size=3, state_size=2))
        >>> model.loss(torch.randn(4, 10, 16)).shape
        torch.Size([])
    """

    def __init__(self, config: KalmanSSLConfig) -> None:
        super().__init__()
        self.config = config
        d, lat = config.state_size, config.latent_size
        self.encoder = nn.Sequential(
            nn.Linear(config.input_size, config.hidden_size),
            nn.GELU(),
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.GELU(),
            nn.Linear(config.hidden_size, lat),
        )
        self.transition_raw = nn.Parameter(0.95 * torch.eye(d) + 0.01 * torch.randn(d, d))
        self.center = nn.Parameter(torch.zeros(d))  # b in s_t = A (s_{t-1} - b) + b
        if config.observation == "identity":
            self.register_buffer("observation", torch.eye(d), persistent=False)
        else:
            self.observation = nn.Parameter(torch.randn(lat, d) / math.sqrt(d))
        self.log_q = nn.Parameter(torch.full((d,), -2.0))
        self.log_r = nn.Parameter(torch.full((lat,), -2.0))
        self.log_p0 = nn.Parameter(torch.zeros(d))

    def transition(self) -> torch.Tensor:
        """A with its spectral norm (an upper bound on the spectral radius) clamped to max_spectral_radius."""
        norm = torch.linalg.matrix_norm(self.transition_raw, ord=2)
        scale = torch.clamp(self.config.max_spectral_radius / norm, max=1.0)
        return self.transition_raw * scale

    def filter(self, pseudo: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the Kalman filter on pseudo-observations (N, T, L)."""
        a = self.transition()
        floor = self.config.min_variance
        return kalman_filter(
            pseudo,
            a,
            self.center - a @ self.center,
            self.observation,
            torch.diag(F.softplus(self.log_q) + floor),
            torch.diag(F.softplus(self.log_r) + floor),
            self.center,
            torch.diag(F.softplus(self.log_p0) + floor),
        )

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Frames (N, T, input_size) -> pseudo-observations and filter outputs."""
        if x.dim() != 3 or x.shape[-1] != self.config.input_size:
            raise ValueError(f"expected (N, T, {self.config.input_size}) inputs, got {tuple(x.shape)}.")
        if x.shape[0] == 0 or x.shape[1] < 2:
            raise ValueError("need at least one sequence of at least 2 steps to predict anything.")
        if not torch.isfinite(x).all():
            raise ValueError("inputs contain NaN or inf; clean them before training KalmanSSL.")
        pseudo = self.encoder(x)  # (N, T, L)
        out = self.filter(pseudo)
        out["pseudo"] = pseudo
        return out

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """-(predictive Gaussian log-likelihood of the pseudo-observations + entropy), per step."""
        out = self.forward(x)
        if self.config.entropy == "stopgrad":
            target = out["pseudo"].detach()
            dist = torch.distributions.MultivariateNormal(
                out["obs_mean"], covariance_matrix=out["obs_cov"].unsqueeze(0)
            )
            return -dist.log_prob(target).mean()
        align = out["loglik"].mean()
        entropy = logdet_entropy(out["pseudo"].reshape(-1, self.config.latent_size))
        return -(align + self.config.entropy_weight * entropy)
