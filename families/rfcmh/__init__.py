"""RFCMH: robust fuzzy cross-modal hashing under noisy labels (possibility/necessity admissibility + DGSA)."""

from .config import RFCMHConfig
from .model import (
    RFCMH,
    admissibility,
    mean_average_precision,
    necessity_measure,
    normalize_possibility,
    possibility_measure,
    reliability_weights,
    sample_reliability,
    train_rfcmh,
)

__all__ = [
    "RFCMH",
    "RFCMHConfig",
    "admissibility",
    "mean_average_precision",
    "necessity_measure",
    "normalize_possibility",
    "possibility_measure",
    "reliability_weights",
    "sample_reliability",
    "train_rfcmh",
]
