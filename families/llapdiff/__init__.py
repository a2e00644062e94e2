"""LLapDiff family (incomplete): modal Laplace-pole denoiser for latent diffusion on irregular series."""

from .config import LLapDiffConfig
from .model import LLapDiff, PoleBank, crps_ensemble, fit_poles, laplace_basis

__all__ = ["LLapDiff", "LLapDiffConfig", "PoleBank", "crps_ensemble", "fit_poles", "laplace_basis"]
