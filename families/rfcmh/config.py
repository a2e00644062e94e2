"""Configuration of the RFCMH family (one dataclass, validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass, field

_NONLABEL_NECESSITY = ("dual", "paper_literal")


@dataclass
class RFCMHConfig:
    """Hyper-parameters of Robust Fuzzy Cross-modal Hashing.

    Defaults follow the paper's Section 4.3 where it states a value; the network is smaller
    (hidden 256 instead of 4096) because the demo inputs are 32-d digit halves, not 4096-d CNN features.

    Example:
        >>> cfg = RFCMHConfig(num_bits=32, num_classes=10)
        >>> cfg.warmup_epochs
        3
    """

    # Parameters of the hashing networks
    num_bits: int = field(default=32, metadata={"help": "Code length L (bits)."})
    num_classes: int = field(default=10, metadata={"help": "Number of categories K."})
    hidden_size: int = field(
        default=256, metadata={"help": "Width of the two hidden layers of each encoder."}
    )
    # Parameters of Fuzzy Admissibility Refinement (FAR)
    kappa: int = field(
        default=4,  # paper C.3: mAP peaks for kappa in [3, 4]; they use 4 everywhere
        metadata={"help": "Weight of necessity in admissibility and size of the top-kappa aggregation."},
    )
    delta: float = field(
        default=0.05, metadata={"help": "Conservativeness offset in the reliability weight."}
    )
    tau: float = field(default=0.7, metadata={"help": "Temperature of w_i and of both contrastive terms."})
    gamma: float = field(default=0.2, metadata={"help": "Margin of L_FAR-dagger and of L_inter."})
    use_necessity: bool = field(
        default=True, metadata={"help": "False = ablation RFCMH-4 (possibility only)."}
    )
    nonlabel_necessity: str = field(
        default="dual",  # see README: the PDF prints p_{i,t_i}; duality gives 1 - p_{i,t_i}
        metadata={"help": "'dual': n_ik = N(not t_i) = 1 - p_{i,t_i}; 'paper_literal': n_ik = p_{i,t_i}."},
    )
    # Parameters of Dual-Granularity Structural Alignment (DGSA)
    q: float = field(default=0.01, metadata={"help": "Robustness parameter of the q-contrastive surrogate."})
    relax: float = field(
        default=1.0, metadata={"help": "Delta: down-weighting of easy negatives in L_inter."}
    )
    alpha: float = field(default=0.1, metadata={"help": "Weight of the alignment losses."})
    use_dgsa: bool = field(default=True, metadata={"help": "False = ablation RFCMH-3 (no L_intra/L_inter)."})
    # Parameters of optimisation
    warmup_epochs: int = field(
        default=3, metadata={"help": "t_p: epochs of the warm-up stage (0 = RFCMH-1)."}
    )
    epochs: int = field(default=60, metadata={"help": "Total training epochs."})
    batch_size: int = field(default=64, metadata={"help": "Mini-batch size."})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate (paper 1e-4 for 4096-wide nets)."})
    weight_decay: float = field(default=1e-4, metadata={"help": "Adam weight decay (paper value)."})
    seed: int = field(default=0, metadata={"help": "Seed for initialisation and batch order."})

    def __post_init__(self) -> None:
        problems = []
        for name in ("num_bits", "num_classes", "hidden_size", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.num_classes < 2:
            problems.append(f"`num_classes` must be >= 2, got {self.num_classes}.")
        if self.kappa < 0:
            problems.append(f"`kappa` must be >= 0, got {self.kappa}.")
        if not 0.0 < self.q <= 1.0:
            problems.append(f"`q` must lie in (0, 1], got {self.q}.")
        for name in ("tau", "lr"):
            if getattr(self, name) <= 0:
                problems.append(f"`{name}` must be > 0, got {getattr(self, name)}.")
        for name in ("gamma", "relax", "alpha", "weight_decay"):
            if getattr(self, name) < 0:
                problems.append(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        if not 0 <= self.warmup_epochs <= self.epochs:
            problems.append(
                f"`warmup_epochs` must lie in [0, epochs={self.epochs}], got {self.warmup_epochs}."
            )
        if self.nonlabel_necessity not in _NONLABEL_NECESSITY:
            problems.append(
                f"`nonlabel_necessity` must be one of {_NONLABEL_NECESSITY}, got {self.nonlabel_necessity!r}."
            )
        if problems:
            raise ValueError("Invalid RFCMHConfig: " + " ".join(problems))
