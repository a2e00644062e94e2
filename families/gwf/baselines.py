"""Metrics from the peer libraries (POT, geomloss) and the plain-GAN baselines at the same budget.

f-GAN, WGAN-GP and MMD-GAN have no maintained PyPI package (checked: none on the registry lists we
have), so the baselines are the same networks trained by the standard GAN alternation, which is
`WassersteinFlowTrainer(..., tau=0)`: `critic_steps` critic updates, then one generator step.
"""

from __future__ import annotations

import numpy as np
import torch

from .config import GWFConfig
from .model import WassersteinFlowTrainer

GAN_NAMES = {
    "kl": "f-GAN (KL)",
    "rkl": "f-GAN (rev-KL)",
    "js": "f-GAN (JS)",
    "w1": "WGAN-GP",
    "mmd": "MMD-GAN",
}


def _check(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or len(x) == 0 or len(y) == 0:
        raise ValueError(
            f"samples must be non-empty (N, D) and (M, D) with the same D, got {tuple(x.shape)}, "
            f"{tuple(y.shape)}."
        )
    if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
        raise ValueError("samples contain NaN or inf (did training diverge?).")


def w2_pot(x: torch.Tensor, y: torch.Tensor) -> float:
    """Exact W2 between two empirical measures (POT `ot.emd2`, squared Euclidean cost)."""
    import ot

    _check(x, y)
    a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
    return float(np.sqrt(ot.emd2(a, b, ot.dist(x.double().numpy(), y.double().numpy()), numItermax=500_000)))


def sliced_w2_pot(x: torch.Tensor, y: torch.Tensor, seed: int = 0) -> float:
    """Sliced W2 with 200 projections (POT `ot.sliced_wasserstein_distance`)."""
    import ot

    _check(x, y)
    return float(
        ot.sliced_wasserstein_distance(x.double().numpy(), y.double().numpy(), n_projections=200, seed=seed)
    )


def mmd_geomloss(x: torch.Tensor, y: torch.Tensor, blur: float = 0.5) -> float:
    """Gaussian-kernel MMD (geomloss `SamplesLoss('gaussian')`, which returns MMD^2 / 2)."""
    from geomloss import SamplesLoss

    _check(x, y)
    return float(SamplesLoss("gaussian", blur=blur, backend="tensorized")(x.float(), y.float()))


def gan_baseline(objective: str, config: GWFConfig, seed: int = 0) -> WassersteinFlowTrainer:
    """The plain GAN (f-GAN / WGAN-GP / MMD-GAN) with the same networks: the tau = 0 trainer."""
    return WassersteinFlowTrainer(objective, tau=0.0, config=config, seed=seed)
