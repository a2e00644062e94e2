"""Configuration for the ConFlux family (variable reordering + 2-D variable x time patches + ViT encoder)."""

from __future__ import annotations

from dataclasses import dataclass, field

REORDERINGS = ("spectral", "hclust", "none")


@dataclass
class ConFluxConfig:
    """ConFlux-lite sizes. One token = `patch_vars` adjacent (reordered) variables x `patch_len` steps.

    Example:
        >>> ConFluxConfig(context_length=96, patch_len=8).num_time_patches
        12
    """

    # Parameters of the forecasting window
    context_length: int = field(default=96, metadata={"help": "input steps L (a multiple of patch_len)"})
    horizon: int = field(default=48, metadata={"help": "forecast steps H"})
    # Parameters of the 2-D patches
    patch_vars: int = field(default=4, metadata={"help": "p_v adjacent variables per token"})
    patch_len: int = field(default=8, metadata={"help": "p_t time steps per token"})
    # any N up to max_variables works: variable-slot embeddings are indexed by patch row
    max_variables: int = field(default=128, metadata={"help": "largest number of variables supported"})
    reorder: str = field(default="spectral", metadata={"help": f"variable seriation, one of {REORDERINGS}"})
    # Parameters of the ViT encoder (HF names)
    hidden_size: int = field(default=64, metadata={"help": "token width"})
    num_hidden_layers: int = field(default=2, metadata={"help": "Transformer encoder layers"})
    num_attention_heads: int = field(default=4, metadata={"help": "attention heads"})
    dropout: float = field(default=0.0, metadata={"help": "dropout in the encoder"})

    @property
    def num_time_patches(self) -> int:
        return self.context_length // self.patch_len

    def __post_init__(self) -> None:
        problems = []
        for name in (
            "context_length",
            "horizon",
            "patch_vars",
            "patch_len",
            "max_variables",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
        ):
            if int(getattr(self, name)) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.patch_len >= 1 and self.context_length % self.patch_len:
            problems.append(
                f"`context_length` ({self.context_length}) must be a multiple of `patch_len` ({self.patch_len})"
            )
        if self.num_attention_heads >= 1 and self.hidden_size % self.num_attention_heads:
            problems.append("`hidden_size` must be divisible by `num_attention_heads`")
        if self.reorder not in REORDERINGS:
            problems.append(f"`reorder` must be one of {REORDERINGS}, got {self.reorder!r}")
        if not 0 <= self.dropout < 1:
            problems.append(f"`dropout` must be in [0, 1), got {self.dropout}")
        if problems:
            raise ValueError("Invalid ConFluxConfig: " + "; ".join(problems) + ".")
