"""Configuration of the embedding-translation family."""

from __future__ import annotations

from dataclasses import dataclass, field

_BASES = ("procrustes", "ridge")


@dataclass
class EmbTranslateConfig:
    """Hyper-parameters of the HMoE translator and its geometric confidence.

    The paper's full text was not readable here; every default below is our choice (see README).

    Example:
        >>> EmbTranslateConfig(num_regions=4).experts_per_region
        4
    """

    # Base map shared by all inputs
    base: str = field(default="ridge", metadata={"help": "'ridge' (affine, any dims) or 'procrustes'."})
    ridge_alpha: float = field(default=1.0, metadata={"help": "L2 penalty of the ridge base map."})
    # Hierarchical router: regions (spherical k-means), then experts inside each region
    num_regions: int = field(default=8, metadata={"help": "Level-1 regions (k-means clusters of anchors)."})
    experts_per_region: int = field(default=4, metadata={"help": "Level-2 experts per region."})
    rank: int = field(default=8, metadata={"help": "Rank of each low-rank residual expert."})
    top_regions: int = field(default=2, metadata={"help": "Regions kept per input (sparse level-1 routing)."})
    region_temperature: float = field(
        default=0.1, metadata={"help": "Softmax temperature of region routing."}
    )
    fallback_quantile: float = field(
        default=0.05,  # inputs less similar to every centroid than 95 % of anchors fall back to the base map
        metadata={"help": "Quantile of anchors' best centroid similarity used as the base-map (null) logit."},
    )
    # Training of the residual experts
    steps: int = field(default=400, metadata={"help": "Adam steps on the anchor pairs."})
    batch_size: int = field(default=128, metadata={"help": "Anchor pairs per step (also InfoNCE negatives)."})
    lr: float = field(default=3e-3, metadata={"help": "Adam learning rate."})
    weight_decay: float = field(default=1e-4, metadata={"help": "Keeps residuals small away from anchors."})
    infonce_weight: float = field(
        default=0.5, metadata={"help": "Weight of in-batch InfoNCE next to cosine loss."}
    )
    infonce_temperature: float = field(default=0.05, metadata={"help": "Temperature of InfoNCE."})
    # Geometric confidence
    knn: int = field(default=5, metadata={"help": "Calibration anchors used per input in the error bound."})
    calibration_fraction: float = field(default=0.2, metadata={"help": "Anchors held out to measure errors."})
    seed: int = field(default=0, metadata={"help": "Seed of k-means, initialisation and batches."})

    def __post_init__(self) -> None:
        problems = []
        if self.base not in _BASES:
            problems.append(f"`base` must be one of {_BASES}, got {self.base!r}.")
        if self.steps < 0:
            problems.append(f"`steps` must be >= 0, got {self.steps}.")
        for name in ("num_regions", "experts_per_region", "rank", "top_regions", "batch_size", "knn"):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.top_regions > self.num_regions:
            problems.append(
                f"`top_regions` ({self.top_regions}) must be <= `num_regions` ({self.num_regions})."
            )
        for name in ("ridge_alpha", "weight_decay", "infonce_weight"):
            if getattr(self, name) < 0:
                problems.append(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        for name in ("region_temperature", "lr", "infonce_temperature"):
            if getattr(self, name) <= 0:
                problems.append(f"`{name}` must be > 0, got {getattr(self, name)}.")
        for name in ("fallback_quantile", "calibration_fraction"):
            if not 0.0 <= getattr(self, name) < 1.0:
                problems.append(f"`{name}` must lie in [0, 1), got {getattr(self, name)}.")
        if problems:
            raise ValueError("Invalid EmbTranslateConfig: " + " ".join(problems))
