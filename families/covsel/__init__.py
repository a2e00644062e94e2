"""Local covariate selection for average causal effect estimation (arXiv 2605.21548)."""

from .citests import DSeparationOracle, FisherZTest
from .config import CovselConfig
from .model import ADJUST, NOT_IDENTIFIABLE, ZERO, CovselResult, LocalCovariateSelector, estimate_ace

__all__ = [
    "ADJUST",
    "NOT_IDENTIFIABLE",
    "ZERO",
    "CovselConfig",
    "CovselResult",
    "DSeparationOracle",
    "FisherZTest",
    "LocalCovariateSelector",
    "estimate_ace",
]
