"""Configuration of the embedding-translation family."""

from __future__ import annotations

from dataclasses import dataclass, field

_BASES = ("procrustes", "ridge")


@dataclass
class EmbTranslateConfig:
    """Hyper-parameters of our HMoE reconstruction (the ablation) and its geometric confidence.

    Every default below is our choice (see README); the reference method uses `LoRAHMoEConfig`.

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


@dataclass
class LoRAHMoEConfig:
    """Hyper-parameters of the reference HMoE: frozen SELU MLP base, KMeans tree, per-node LoRA adapters.

    Defaults follow the reference implementation's paper-canonical settings (K = 4 leaves from 3 levels
    with branching 2, rank 8, LoRA alpha 16, local weight 0.5, direction weight 0.7, tau 0.8, m = 100
    neighbours, L1 base loss, hidden width 512, 4 layers, SELU). Step counts and learning rates are our
    choice for ~1,000 anchors on a CPU (the reference trains for epochs over much larger corpora).

    Example:
        >>> LoRAHMoEConfig().num_leaves
        4
    """

    hidden_dim: int = field(default=512, metadata={"help": "Width of the SELU MLP base."})
    layer_num: int = field(default=4, metadata={"help": "Hidden layers of the SELU MLP base."})
    base_steps: int = field(default=500, metadata={"help": "Adam steps of the L1 base fit."})
    base_lr: float = field(default=2e-4, metadata={"help": "Learning rate of the base fit."})
    batch_size: int = field(default=256, metadata={"help": "Rows per step (base and adapters)."})
    num_levels: int = field(default=3, metadata={"help": "Tree levels, root included."})
    branch_factor: int = field(default=2, metadata={"help": "Children per internal node."})
    lora_rank: int = field(default=8, metadata={"help": "Rank of each adapter."})
    lora_alpha: float = field(default=16.0, metadata={"help": "LoRA scaling numerator (scale alpha/rank)."})
    lora_steps: int = field(default=80, metadata={"help": "Adam steps per node adapter."})
    lora_lr: float = field(default=1e-4, metadata={"help": "Learning rate of the adapters (paper: 1e-4)."})
    cosine_weight: float = field(default=0.5, metadata={"help": "Weight of 1 - cos in the regression loss."})
    mse_weight: float = field(default=1.0, metadata={"help": "Weight of MSE in the regression loss."})
    local_weight: float = field(default=0.5, metadata={"help": "Weight of the local-structure loss."})
    dir_weight: float = field(default=0.7, metadata={"help": "Weight of the directional residual loss."})
    dir_channel: str = field(
        default="u1", metadata={"help": "'u1' (mixing, first hop) or 'u2' (second hop of a chain)."}
    )
    local_nn_m: int = field(default=100, metadata={"help": "Neighbours per row in the local loss."})
    tau: float = field(default=0.8, metadata={"help": "Routing descends while d1 <= tau * d2."})
    min_node_samples: int = field(default=10, metadata={"help": "Nodes with fewer rows get no adapter."})
    seed: int = field(default=0, metadata={"help": "Seed of clustering, initialisation and batches."})

    @property
    def num_leaves(self) -> int:
        """Leaves of the tree: branch_factor ** (num_levels - 1)."""
        return self.branch_factor ** (self.num_levels - 1)

    def __post_init__(self) -> None:
        problems = []
        for name in ("hidden_dim", "layer_num", "batch_size", "lora_rank", "local_nn_m", "min_node_samples"):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.num_levels < 1 or self.branch_factor < 2:
            problems.append(
                f"`num_levels` must be >= 1 and `branch_factor` >= 2, got {self.num_levels}, {self.branch_factor}."
            )
        for name in ("base_steps", "lora_steps"):
            if getattr(self, name) < 0:
                problems.append(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        for name in ("cosine_weight", "mse_weight", "local_weight", "dir_weight"):
            if getattr(self, name) < 0:
                problems.append(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        for name in ("base_lr", "lora_lr", "lora_alpha"):
            if getattr(self, name) <= 0:
                problems.append(f"`{name}` must be > 0, got {getattr(self, name)}.")
        if not 0.0 <= self.tau <= 1.0:
            problems.append(f"`tau` must lie in [0, 1], got {self.tau}.")
        if self.dir_channel not in ("u1", "u2"):
            problems.append(f"`dir_channel` must be 'u1' or 'u2', got {self.dir_channel!r}.")
        if problems:
            raise ValueError("Invalid LoRAHMoEConfig: " + " ".join(problems))
