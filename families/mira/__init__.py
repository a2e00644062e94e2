"""MIRA: a sample-based score of conditional distributions (arXiv 2605.02014), with a sharpness companion."""

from .config import MiraConfig
from .model import (
    MiraResult,
    ModelComparison,
    compare_models,
    energy_score,
    mira,
    mira_reference,
)

__all__ = [
    "MiraConfig",
    "MiraResult",
    "ModelComparison",
    "compare_models",
    "energy_score",
    "mira",
    "mira_reference",
]
