"""BLCE / BLCE-G (arXiv 2606.00984): linear contextual bandits with O(log log T) parameter updates."""

from .config import BLCEConfig
from .model import BLCE, g_optimal_design, grid_size_bound, logistic_mle, sherman_morrison, static_grid

__all__ = [
    "BLCE",
    "BLCEConfig",
    "g_optimal_design",
    "grid_size_bound",
    "logistic_mle",
    "sherman_morrison",
    "static_grid",
]
