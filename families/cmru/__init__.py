"""CMRU family: quantized-state memory recurrent units (BMRU, CMRU, alpha-CMRU) with LRU/minGRU baselines."""

from .config import CMRUConfig
from .model import LRUUnit, MemoryUnit, RecurrentClassifier, gradient_through_time, linear_scan

__all__ = [
    "CMRUConfig",
    "LRUUnit",
    "MemoryUnit",
    "RecurrentClassifier",
    "gradient_through_time",
    "linear_scan",
]
