"""Embedding translation between real embedding models: the reference HMoE (LoRA experts on a KMeans tree),
base maps, our HMoE ablation, and two confidences (nearest-neighbour TC and a geometric bound)."""

from .config import EmbTranslateConfig, LoRAHMoEConfig
from .hmoe_lora import LoRAHMoE, TranslationConfidence
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
    "LoRAHMoE",
    "LoRAHMoEConfig",
    "chain",
    "chained_bound",
    "fit_mlp",
    "fit_procrustes",
    "fit_ridge",
    "gold_ranks",
    "nearest_anchor_similarity",
    "recall_at_k",
    "TranslationConfidence",
]
