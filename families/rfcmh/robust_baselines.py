"""Two noise-robust cross-modal hashing methods from the paper's comparison table, on RFCMH's encoders.

- RSHNL (Pu et al., AAAI 2025; reference code github.com/perquisite/RSHNL, read, not copied):
  class centres from a small embedding network, per-sample q-loss on softmax(z W^T), linear
  self-paced weights w = max(0, 1 - l / gamma) with regulariser gamma (w^2 / 2 - w) after a turning
  point, plus a q-contrastive cross-modal term.
- SCBCH (reference code github.com/Plke/SCBCH, read, not copied): per-modality sigmoid classifiers
  with BCE, a bidirectional margin-shifted contrastive loss with label-overlap masking, a quantisation
  loss, and per-sample clean weights from kNN label agreement in code space after a warm-up.

Both use the same encoders, code length, epochs, batch size and learning rate as RFCMH, so only the
training objective differs; the demo states where our sizes differ from the references'.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import RFCMHConfig
from .model import RFCMH, check_pair, epoch_batches, q_surrogate


class ClassCentres(nn.Module):
    """RSHNL's centre network: one-hot class -> MLP -> l2-normalised tanh centre in code space."""

    def __init__(self, num_classes: int, hidden_size: int, num_bits: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(num_classes, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, num_bits),
        )
        self.num_classes = num_classes

    def forward(self) -> torch.Tensor:
        return F.normalize(torch.tanh(self.net(torch.eye(self.num_classes))), dim=1)  # (K, L)


def _rshnl_sample_loss(z1, z2, centres, labels, q):  # noqa: ANN001, ANN202 - internal
    """l_q of the labelled class under softmax(z W^T) in each view, summed over the two views: (B,)."""
    p1 = torch.softmax(z1 @ centres.T, dim=1).gather(1, labels[:, None]).squeeze(1)
    p2 = torch.softmax(z2 @ centres.T, dim=1).gather(1, labels[:, None]).squeeze(1)
    return q_surrogate(p1, q) + q_surrogate(p2, q)


def _rshnl_contrastive(z1: torch.Tensor, z2: torch.Tensor, tau: float, q: float) -> torch.Tensor:
    """q-loss of each item's cross-modal partner against all 2B - 1 other items (both directions)."""
    z = torch.cat([z1, z2])
    sim = torch.exp(z @ z.T / tau)
    sim = sim - torch.diag(sim.diagonal())
    b = len(z1)
    partner = torch.cat([torch.arange(b, 2 * b), torch.arange(b)])
    p = sim[torch.arange(2 * b), partner] / sim.sum(1)
    return 2.0 * q_surrogate(p, q).mean()  # the reference sums a row-wise and an identical column-wise term


def train_rshnl(
    config: RFCMHConfig,
    x1: torch.Tensor,
    x2: torch.Tensor,
    labels: torch.Tensor,
    gamma: float = 5.0,
    tau: float = 1.0,
    alpha: float = 0.1,
) -> tuple[RFCMH, torch.Tensor]:
    """Train RSHNL; returns the model and its final self-paced weights (the label-reliability score)."""
    check_pair(x1, x2, labels, num_classes=config.num_classes)
    torch.manual_seed(config.seed)
    model = RFCMH(config, (x1.shape[1], x2.shape[1]))
    centres = ClassCentres(config.num_classes, config.hidden_size, config.num_bits)
    opt = torch.optim.Adam([*model.parameters(), *centres.parameters()], lr=config.lr)
    gen = torch.Generator().manual_seed(config.seed)
    for epoch in range(config.epochs):
        for idx in epoch_batches(len(x1), config.batch_size, gen):
            z1, z2 = model.represent(x1[idx], 0), model.represent(x2[idx], 1)
            term = _rshnl_sample_loss(z1, z2, centres(), labels[idx], config.q)
            if epoch >= config.warmup_epochs:  # self-paced: easy (low-loss) samples first, hard ones dropped
                w = (1.0 - term / gamma).clamp_min(0.0).detach()
                term = w * term + gamma * (0.5 * w**2 - w)
            loss = term.mean() + alpha * _rshnl_contrastive(z1, z2, tau, config.q)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        z1, z2 = model.represent(x1, 0), model.represent(x2, 1)
        weight = (1.0 - _rshnl_sample_loss(z1, z2, centres(), labels, config.q) / gamma).clamp_min(0.0)
    return model.eval(), weight


def _scbch_contrast(
    u: torch.Tensor, v: torch.Tensor, same: torch.Tensor, margin: float, shift: float, tau: float
):  # noqa: ANN202
    """Bidirectional contrast: negatives far below the matched pair are shifted down by `shift`; pairs
    sharing a label are excluded from the push (exponent times 1 - T) and pulled together instead."""
    S = u @ v.T
    diag = S.diagonal()[:, None]
    eye = torch.eye(len(S), dtype=torch.bool)
    total = S.new_zeros(())
    for ref in (diag, diag.T):  # text-to-image rows, then image-to-text columns
        cost = torch.where(S >= ref - margin, S, S - shift)
        cost = torch.where(eye, cost.clamp_min(0.0), cost)
        total = total + (tau * torch.exp(cost / tau * (1.0 - same))).mean()
    positives = (same - eye.float()) > 0
    separation = (positives.float() * torch.exp(shift - S)).mean()
    return total + separation - S.diagonal().mean()


@torch.no_grad()
def scbch_clean_weights(
    u: torch.Tensor, v: torch.Tensor, onehot: torch.Tensor, k: int = 20, floor: float = 0.5
):
    """floor + (1 - floor) * cos(label, similarity-weighted label of the k nearest neighbours in code space)."""
    un, vn = F.normalize(u, dim=1), F.normalize(v, dim=1)
    sim = 0.5 * (un @ un.T + vn @ vn.T)
    sim.fill_diagonal_(0.0)
    top, nn_idx = sim.topk(min(k, len(sim) - 1), dim=1)
    top = top / (top.sum(1, keepdim=True) + 1e-8)
    propagated = (onehot[nn_idx] * top[..., None]).sum(1)
    return floor + (1.0 - floor) * F.cosine_similarity(onehot, propagated, dim=1)


def train_scbch(
    config: RFCMHConfig,
    x1: torch.Tensor,
    x2: torch.Tensor,
    labels: torch.Tensor,
    lambda_contrast: float = 0.3,
    lambda_quant: float = 0.7,
    margin: float = 0.2,
    shift: float = 1.0,
    tau: float = 1.0,
    k: int = 20,
) -> tuple[RFCMH, torch.Tensor]:
    """Train SCBCH; returns the model and its final kNN clean weights (the label-reliability score)."""
    check_pair(x1, x2, labels, num_classes=config.num_classes)
    torch.manual_seed(config.seed)
    model = RFCMH(config, (x1.shape[1], x2.shape[1]))
    heads = nn.ParameterList(
        nn.Parameter(nn.init.orthogonal_(torch.empty(config.num_bits, config.num_classes))) for _ in range(2)
    )
    opt = torch.optim.Adam([*model.parameters(), *heads.parameters()], lr=config.lr, weight_decay=1e-5)
    onehot = F.one_hot(labels, config.num_classes).float()
    gen = torch.Generator().manual_seed(config.seed)
    weights = None
    for epoch in range(config.epochs):
        if epoch >= config.warmup_epochs:
            with torch.no_grad():
                weights = scbch_clean_weights(model.represent(x1, 0), model.represent(x2, 1), onehot, k)
        for idx in epoch_batches(len(x1), config.batch_size, gen):
            u, v, y = model.represent(x1[idx], 0), model.represent(x2[idx], 1), onehot[idx]
            same = (y @ y.T > 0).float()  # Jaccard overlap of one-hot labels: 1 if same class
            cls = 0.5 * sum(
                F.binary_cross_entropy(torch.sigmoid(z @ w), y, reduction="none").mean(1)
                for z, w in ((u, heads[0]), (v, heads[1]))
            )
            cls = (cls * weights[idx]).mean() if weights is not None else cls.mean()
            quant = (u - u.sign()).abs().mean() + (v - v.sign()).abs().mean()
            loss = (
                lambda_contrast * _scbch_contrast(u, v, same, margin, shift, tau) + lambda_quant * quant + cls
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        weights = scbch_clean_weights(model.represent(x1, 0), model.represent(x2, 1), onehot, k)
    return model.eval(), weights
