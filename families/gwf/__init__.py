"""Generative Wasserstein Flows: generator training as parametric JKO steps (arXiv 2605.31369).

Import is cheap: POT and geomloss load only when a metric is computed.
"""

from .config import OBJECTIVES, GWFConfig
from .model import WassersteinFlowTrainer, gaussian_kernel, mmd2, mmd_witness_grad

__all__ = ["OBJECTIVES", "GWFConfig", "WassersteinFlowTrainer", "gaussian_kernel", "mmd2", "mmd_witness_grad"]
