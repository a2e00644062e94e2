"""Peer-library baselines for LDM: pytorch-metric-learning losses, pykalman filters, sklearn PCA/FastICA.

The issue names `lightly` for the reference VICReg/SimCLR losses, but lightly 1.6 imports torchvision
at `import lightly.loss`, and the project constraints forbid torchvision. `pytorch-metric-learning`
ships the same two losses (VICRegLoss, NTXentLoss) and installs cleanly, so we use it instead.
"""

from __future__ import annotations

import numpy as np
import torch


def reference_vicreg(
    z1: torch.Tensor,
    z2: torch.Tensor,
    invariance: float = 25.0,
    variance: float = 25.0,
    covariance: float = 1.0,
) -> torch.Tensor:
    """VICReg loss from pytorch-metric-learning (the reference our LDM.vicreg must equal)."""
    from pytorch_metric_learning.losses import VICRegLoss

    loss = VICRegLoss(invariance_lambda=invariance, variance_mu=variance, covariance_v=covariance)
    return loss(z1, ref_emb=z2)


def reference_ntxent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """SimCLR NT-Xent loss from pytorch-metric-learning (symmetric over both views)."""
    from pytorch_metric_learning.losses import NTXentLoss, SelfSupervisedLoss

    return SelfSupervisedLoss(NTXentLoss(temperature=temperature), symmetric=True)(z1, z2)


def reference_byol(p1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """BYOL's normalised-MSE loss 2 - 2 cos(p, sg(z')) as written in the BYOL paper (no PML version)."""
    return (2 - 2 * torch.nn.functional.cosine_similarity(p1, z2.detach(), dim=-1)).mean()


def pykalman_features(
    train: np.ndarray, test: np.ndarray, state_size: int, em_iters: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, float]:
    """Fit a pykalman linear-Gaussian model by EM on train features (N, T, L); filter train and test.

    Returns filtered means for train and test (N, T, D) and the mean per-step predictive log-likelihood on
    test (pykalman's `loglikelihood`, divided by the number of steps).
    """
    from pykalman import KalmanFilter

    kf = KalmanFilter(
        n_dim_state=state_size,
        n_dim_obs=train.shape[-1],
        random_state=seed,
        em_vars=[
            "transition_matrices",
            "observation_matrices",
            "transition_covariance",
            "observation_covariance",
            "initial_state_mean",
            "initial_state_covariance",
        ],
    )
    kf = kf.em(train[: min(len(train), 20)].reshape(-1, train.shape[-1]), n_iter=em_iters)
    filt = lambda arr: np.stack([kf.filter(seq)[0] for seq in arr])  # noqa: E731
    loglik = float(np.mean([kf.loglikelihood(seq) / seq.shape[0] for seq in test]))
    return filt(train), filt(test), loglik
