"""Configuration for AO-GPT (decoder-only masked diffusion as any-order autoregression)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AOGPTConfig:
    """Decoder-only transformer trained on randomly permuted sequences, conditioned on the target position.

    Example:
        >>> AOGPTConfig(vocab_size=32, block_size=16).random_ratio
        0.9
    """

    # Parameters of the model (HF field names)
    vocab_size: int = field(
        default=96, metadata={"help": "Number of tokens (the [None] start token is extra)."}
    )
    block_size: int = field(default=128, metadata={"help": "Sequence length T."})
    hidden_size: int = field(default=64, metadata={"help": "Model width d."})
    num_hidden_layers: int = field(default=2, metadata={"help": "Transformer blocks."})
    num_attention_heads: int = field(
        default=4, metadata={"help": "Attention heads; must divide hidden_size."}
    )
    target_pos_dim: int = field(
        default=32, metadata={"help": "Width of the target-position embedding (AdaLN)."}
    )
    # Parameters of the order curriculum
    random_ratio: float = field(
        default=0.9,
        metadata={"help": "Share of uniformly random orders; the rest are left-to-right (paper: 0.9)."},
    )

    def __post_init__(self) -> None:
        problems = []
        for name in ("vocab_size", "block_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "target_pos_dim"):  # fmt: skip
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % max(1, self.num_attention_heads):
            problems.append(
                f"`hidden_size` ({self.hidden_size}) must be divisible by `num_attention_heads` "
                f"({self.num_attention_heads})"
            )
        if not 0.0 <= self.random_ratio <= 1.0:
            problems.append(f"`random_ratio` must be in [0, 1], got {self.random_ratio}")
        if problems:
            raise ValueError("Invalid AOGPTConfig: " + "; ".join(problems) + ".")
