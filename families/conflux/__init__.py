"""ConFlux family: variable seriation + 2-D (variable x time) patch ViT forecaster for any number of variables."""

from .config import ConFluxConfig
from .model import ConFlux, inverse_permutation, patchify, seriation_order, unpatchify

__all__ = ["ConFlux", "ConFluxConfig", "inverse_permutation", "patchify", "seriation_order", "unpatchify"]
