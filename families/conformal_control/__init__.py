"""Conformal policy control (arXiv 2603.02196): risk-controlled clipping of an optimized policy."""

from .config import ConformalControlConfig
from .model import (
    CalibrationResult,
    ConformalPolicyController,
    ConstrainedPolicy,
    calibrate_beta,
    calibrate_beta_sequential,
    estimate_psi,
    fixed_sequence_select,
    weighted_bound,
)

__all__ = [
    "CalibrationResult",
    "ConformalControlConfig",
    "ConformalPolicyController",
    "ConstrainedPolicy",
    "calibrate_beta",
    "calibrate_beta_sequential",
    "estimate_psi",
    "fixed_sequence_select",
    "weighted_bound",
]
