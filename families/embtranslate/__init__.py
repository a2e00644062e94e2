"""Embedding translation between real embedding models: base maps, HMoE and a geometric confidence."""

from .config import EmbTranslateConfig
from .model import (
    GeometricConfidence,
    HMoETranslator,
    LinearMap,
    chain,
    chained_bound,
    fit_mlp,
    fit_procrustes,
    fit_ridge,
    gold_ranks,
    nearest_anchor_similarity,
    recall_at_k,
)

__all__ = [
    "EmbTranslateConfig",
    "GeometricConfidence",
    "HMoETranslator",
    "LinearMap",
    "chain",
    "chained_bound",
    "fit_mlp",
    "fit_procrustes",
    "fit_ridge",
    "gold_ranks",
    "nearest_anchor_similarity",
    "recall_at_k",
]
