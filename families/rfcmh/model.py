"""RFCMH: two hashing encoders, fuzzy admissibility (possibility + necessity) and DGSA alignment.

Paper: Sun, Pu, Shi, Ren, Hu, Sun, "Learning with Admissibility: Robust Fuzzy Hashing for Cross-Modal
Retrieval with Noisy Labels", ICML 2026. Reference code (read-only): github.com/XinchengSun/RFCMH.
Equation numbers below are the paper's. Where the public code differs, we implement the paper (see
README "Paper vs code"), except for the non-label necessity where the printed formula breaks the
possibility/necessity duality (config `nonlabel_necessity`).

Shapes: B = batch, D = input features, L = code bits, K = classes.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import RFCMHConfig

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# Possibility theory on a finite label set


def normalize_possibility(p: torch.Tensor) -> torch.Tensor:
    """Scale each row so its largest degree is 1: a *normal* possibility distribution (needed for N <= Pi)."""
    if p.dim() != 2 or (p < 0).any():
        raise ValueError("`p` must be a non-negative (B, K) tensor of possibility degrees.")
    return p / p.max(dim=1, keepdim=True).values.clamp_min(1e-12)


def possibility_measure(pi: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    """Pi(A) = max_{k in A} pi_k, with Pi(empty set) = 0. `event` is a (B, K) or (K,) boolean mask."""
    event = event.expand_as(pi).bool()
    return torch.where(event, pi, torch.zeros_like(pi)).max(dim=1).values  # (B,)


def necessity_measure(pi: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    """N(A) = 1 - Pi(not A): the duality that defines necessity from possibility."""
    return 1.0 - possibility_measure(pi, ~event.expand_as(pi).bool())


def admissibility(
    p: torch.Tensor,
    labels: torch.Tensor,
    kappa: int,
    use_necessity: bool = True,
    nonlabel_necessity: str = "dual",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. (1)-(2): necessity n (B, K) and admissibility a (B, K) of each class given the noisy label.

    Labelled class t: n = 1 - mean of the top-kappa non-label possibilities (kappa = 1 is exactly
    N({t}) = 1 - Pi(not t)), a = (p + kappa n) / (1 + kappa). Non-label class k: n = N(not t) = 1 - p_t
    ("dual") or the PDF's printed p_t ("paper_literal"), a = (p + n) / 2.
    """
    B, K = p.shape
    onehot = F.one_hot(labels, K).bool()  # (B, K)
    p_label = p.gather(1, labels[:, None])  # (B, 1)
    k_eff = max(1, min(kappa, K - 1))
    others = p.masked_fill(onehot, float("-inf"))
    comp = others.topk(k_eff, dim=1).values.mean(dim=1, keepdim=True)  # (B, 1)
    n_nonlabel = 1.0 - p_label if nonlabel_necessity == "dual" else p_label
    n = torch.where(onehot, 1.0 - comp, n_nonlabel)  # (B, K)
    if not use_necessity or kappa == 0:
        return n, p  # kappa = 0 / ablation RFCMH-4: admissibility from possibility alone
    a = torch.where(onehot, (p + kappa * n) / (1 + kappa), (p + n) / 2)
    return n, a


def reliability_weights(
    a1: torch.Tensor, a2: torch.Tensor, labels: torch.Tensor, delta: float, tau: float
) -> torch.Tensor:
    """Eq. (4): w_i = sigmoid((abar_{i,t} - max_{k != t} abar_{i,k} - delta) / tau), abar = mean over modalities."""
    abar = 0.5 * (a1 + a2)  # (B, K)
    onehot = F.one_hot(labels, abar.shape[1]).bool()
    gap = abar.gather(1, labels[:, None]).squeeze(1) - abar.masked_fill(onehot, float("-inf")).max(1).values
    return torch.sigmoid((gap - delta) / tau)  # (B,)


# ----------------------------------------------------------------------------------------------
# Losses


def far_warmup_loss(a1: torch.Tensor, a2: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eq. (3): squared distance between each modality's admissibility and the (noisy) one-hot label."""
    y = F.one_hot(labels, a1.shape[1]).to(a1.dtype)
    return ((a1 - y).pow(2).sum(1) + (a2 - y).pow(2).sum(1)).mean()


def far_margin_loss(
    z1: torch.Tensor, z2: torch.Tensor, labels: torch.Tensor, w: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Eq. (5): reliability-weighted margin on cross-modal similarities (mean over the i != j pairs)."""
    S = z1 @ z2.T  # (B, B)
    zeta = torch.where(labels[:, None] == labels[None, :], 1.0, -1.0).to(S.dtype)
    pair_w = torch.minimum(w[:, None], w[None, :])
    off = ~torch.eye(len(S), dtype=torch.bool, device=S.device)
    return (pair_w * F.relu(gamma - zeta * S))[off].mean()


def q_surrogate(p: torch.Tensor, q: float) -> torch.Tensor:
    """Eq. (7): l_q(p) = (1 - q)(1 - p^q)/q + q(1 - p); its gradient grows slower than -log p's as p -> 0."""
    p = p.clamp_min(1e-12)
    return (1 - q) * (1 - p.pow(q)) / q + q * (1 - p)


def intra_loss(S: torch.Tensor, tau: float, q: float) -> torch.Tensor:
    """Eq. (6)-(7), summed over I2T and T2I: q-contrastive loss of the matched pair against the batch."""
    p_i2t = torch.softmax(S / tau, dim=1).diagonal()  # row i: image i against all texts
    p_t2i = torch.softmax(S / tau, dim=0).diagonal()  # column i: text i against all images
    return q_surrogate(p_i2t, q).mean() + q_surrogate(p_t2i, q).mean()


def inter_loss(S: torch.Tensor, tau: float, gamma: float, relax: float) -> torch.Tensor:
    """Eq. (8)-(9), summed over I2T and T2I: log-sum-exp over margin-violating negatives."""
    total = S.new_zeros(())
    off = ~torch.eye(len(S), dtype=torch.bool, device=S.device)
    for sim in (S, S.T):  # I2T uses S_ij, T2I uses S_ji
        diag = sim.diagonal()[:, None]  # (B, 1)
        cost = torch.where(sim > diag - gamma, sim, sim - relax)  # easy negatives pushed down by Delta
        lse = torch.logsumexp((cost / tau).masked_fill(~off, float("-inf")), dim=1)
        total = total + (-diag.squeeze(1) + tau * lse + gamma).mean()
    return total


# ----------------------------------------------------------------------------------------------
# Networks


class HashEncoder(nn.Module):
    """3-layer MLP H(x); tanh relaxation for training, sign for the binary code."""

    def __init__(self, in_features: int, hidden_size: int, num_bits: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, num_bits),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return H(x), the pre-activation of the code, shape (B, L)."""
        return self.net(x)


class RFCMH(nn.Module):
    """Two modality encoders plus a shared possibility collection layer P in R^{L x K}.

    Example:
        >>> model = RFCMH(RFCMHConfig(num_bits=16), in_features=(32, 32))
        >>> model.encode(torch.randn(4, 32), modality=0).abs().unique().tolist()
        [1.0]
    """

    def __init__(self, config: RFCMHConfig, in_features: tuple[int, int]) -> None:
        super().__init__()
        self.config = config
        self.encoders = nn.ModuleList(
            HashEncoder(d, config.hidden_size, config.num_bits) for d in in_features
        )
        # Paper: a trainable layer P; the public code uses a fixed orthogonal prototype buffer instead.
        self.possibility_layer = nn.Linear(config.num_bits, config.num_classes, bias=False)

    def represent(self, x: torch.Tensor, modality: int) -> torch.Tensor:
        """z = l2-normalised tanh(H(x)), the shared continuous representation (B, L)."""
        return F.normalize(torch.tanh(self.encoders[modality](x)), dim=1)

    def possibility(self, z: torch.Tensor) -> torch.Tensor:
        """p = sigmoid(P(z)): per-class possibility degrees (B, K)."""
        return torch.sigmoid(self.possibility_layer(z))

    @torch.no_grad()
    def encode(self, x: torch.Tensor, modality: int) -> torch.Tensor:
        """Binary code b = sign(H(x)) in {-1, +1}^L (a zero pre-activation maps to +1)."""
        h = self.encoders[modality](x)
        return torch.where(h >= 0, 1.0, -1.0)


# ----------------------------------------------------------------------------------------------
# Training


def check_pair(x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor, *, num_classes: int) -> None:
    """Raise unless `x1`, `x2` and `labels` are one paired batch with labels in `[0, num_classes)`."""
    if x1.dim() != 2 or x2.dim() != 2 or labels.dim() != 1:
        raise ValueError("Expected `x1` (N, D1), `x2` (N, D2) and integer `labels` (N,).")
    if not len(x1) == len(x2) == len(labels):
        raise ValueError(
            f"`x1`, `x2`, `labels` must have the same length, got {len(x1)}, {len(x2)}, {len(labels)}."
        )
    if len(x1) < 2:
        raise ValueError("Need at least 2 training pairs; pass more data.")
    if not (torch.isfinite(x1).all() and torch.isfinite(x2).all()):
        raise ValueError("`x1`/`x2` contain NaN or inf; clean or impute the features first.")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(f"`labels` must lie in [0, {num_classes}); set `num_classes` to match the data.")


def epoch_batches(n: int, batch_size: int, gen: torch.Generator) -> list[torch.Tensor]:
    """One epoch's shuffled index batches (one `randperm` draw from `gen`); a last batch of fewer than two
    rows is dropped, since every loss here contrasts rows within a batch."""
    perm = torch.randperm(n, generator=gen)
    batches = [perm[start : start + batch_size] for start in range(0, n, batch_size)]
    return [idx for idx in batches if len(idx) >= 2]


def train_rfcmh(config: RFCMHConfig, x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor) -> RFCMH:
    """Algorithm 1: warm-up with L_FAR + alpha L_intra, then L_FAR-dagger + alpha (L_intra + L_inter)."""
    check_pair(x1, x2, labels, num_classes=config.num_classes)
    torch.manual_seed(config.seed)
    model = RFCMH(config, (x1.shape[1], x2.shape[1]))
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(config.seed)
    for epoch in range(1, config.epochs + 1):
        for idx in epoch_batches(len(x1), config.batch_size, gen):
            loss = _batch_loss(model, x1[idx], x2[idx], labels[idx], warmup=epoch <= config.warmup_epochs)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 20 == 0 or epoch == config.epochs:
            logger.info("epoch %d loss %.4f", epoch, loss.item())
    return model.eval()


def _batch_loss(
    model: RFCMH, x1: torch.Tensor, x2: torch.Tensor, y: torch.Tensor, warmup: bool
) -> torch.Tensor:
    cfg = model.config
    z1, z2 = model.represent(x1, 0), model.represent(x2, 1)
    S = z1 @ z2.T  # (B, B) cosine similarities
    adm = dict(kappa=cfg.kappa, use_necessity=cfg.use_necessity, nonlabel_necessity=cfg.nonlabel_necessity)
    _, a1 = admissibility(model.possibility(z1), y, **adm)
    _, a2 = admissibility(model.possibility(z2), y, **adm)
    align = intra_loss(S, cfg.tau, cfg.q) if cfg.use_dgsa else S.new_zeros(())
    if warmup:
        return far_warmup_loss(a1, a2, y) + cfg.alpha * align
    w = reliability_weights(a1, a2, y, cfg.delta, cfg.tau).detach()  # weights select pairs; no gradient
    if cfg.use_dgsa:
        align = align + inter_loss(S, cfg.tau, cfg.gamma, cfg.relax)
    return far_margin_loss(z1, z2, y, w, cfg.gamma) + cfg.alpha * align


@torch.no_grad()
def sample_reliability(
    model: RFCMH, x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Reliability weight w_i of every (noisy) training label: low values flag likely label errors."""
    check_pair(x1, x2, labels, num_classes=model.config.num_classes)
    cfg = model.config
    adm = dict(kappa=cfg.kappa, use_necessity=cfg.use_necessity, nonlabel_necessity=cfg.nonlabel_necessity)
    _, a1 = admissibility(model.possibility(model.represent(x1, 0)), labels, **adm)
    _, a2 = admissibility(model.possibility(model.represent(x2, 1)), labels, **adm)
    return reliability_weights(a1, a2, labels, cfg.delta, cfg.tau)


# ----------------------------------------------------------------------------------------------
# Retrieval metric


def mean_average_precision(
    query_codes: np.ndarray | torch.Tensor,
    db_codes: np.ndarray | torch.Tensor,
    query_labels: np.ndarray | torch.Tensor,
    db_labels: np.ndarray | torch.Tensor,
) -> float:
    """mAP@all with Hamming ranking; ties broken by database index (stable sort); relevant = same label.

    Queries with no relevant item in the database are skipped (their AP is undefined).
    """
    qc, dc = np.asarray(query_codes, dtype=np.float64), np.asarray(db_codes, dtype=np.float64)
    ql, dl = np.asarray(query_labels), np.asarray(db_labels)
    if qc.ndim != 2 or dc.ndim != 2 or qc.shape[1] != dc.shape[1]:
        raise ValueError(f"Codes must be (Q, L) and (N, L) with the same L, got {qc.shape} and {dc.shape}.")
    if len(qc) != len(ql) or len(dc) != len(dl) or len(qc) == 0 or len(dc) == 0:
        raise ValueError("Need non-empty codes with one label per code row.")
    hamming = 0.5 * (qc.shape[1] - qc @ dc.T)  # (Q, N); valid for {-1, +1} codes
    order = np.argsort(hamming, axis=1, kind="stable")
    rel = (ql[:, None] == dl[None, :])[np.arange(len(qc))[:, None], order].astype(np.float64)  # (Q, N)
    hits = rel.sum(1)
    cum = np.cumsum(rel, axis=1)
    prec_at_hit = cum / np.arange(1, dc.shape[0] + 1)[None, :] * rel
    valid = hits > 0
    return float((prec_at_hit.sum(1)[valid] / hits[valid]).mean()) if valid.any() else 0.0
