"""Configuration for the subgrammar family (LM learning dynamics on PCFG subgrammars)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SubgrammarConfig:
    """Tiny GPT-2 trained on strings of a PCFG, evaluated per subgrammar.

    Example:
        >>> SubgrammarConfig(hidden_size=16, num_hidden_layers=1).num_attention_heads
        2
    """

    # Parameters of the model (Hugging Face GPT-2 field names)
    hidden_size: int = field(default=16, metadata={"help": "Model width d."})
    num_hidden_layers: int = field(default=2, metadata={"help": "Transformer layers."})
    num_attention_heads: int = field(
        default=2, metadata={"help": "Attention heads; must divide hidden_size."}
    )
    max_position_embeddings: int = field(
        default=96, metadata={"help": "Longest string (tokens incl. BOS/EOS)."}
    )
    # Parameters of training (the reference code uses AdamW 6e-4, wd 0.1, betas (0.9, 0.95), clip 1; we
    # use a larger lr because our runs are ~100x shorter)
    learning_rate: float = field(default=3e-3, metadata={"help": "AdamW learning rate."})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay."})
    batch_size: int = field(default=32, metadata={"help": "Strings per step."})
    train_steps: int = field(default=600, metadata={"help": "Optimiser steps on the full grammar."})
    pretrain_steps: int = field(default=0, metadata={"help": "Steps on standalone subgrammar strings first."})
    eval_every: int = field(default=50, metadata={"help": "Steps between per-subgrammar KL evaluations."})
    num_train: int = field(default=5000, metadata={"help": "Training strings sampled from the PCFG."})
    num_test: int = field(default=500, metadata={"help": "Held-out strings for the KL estimates."})

    def __post_init__(self) -> None:
        problems = []
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
                     "batch_size", "train_steps", "eval_every", "num_train", "num_test"):  # fmt: skip
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if (
            self.hidden_size >= 1
            and self.num_attention_heads >= 1
            and self.hidden_size % self.num_attention_heads
        ):
            problems.append(
                f"`hidden_size` ({self.hidden_size}) must be divisible by `num_attention_heads` "
                f"({self.num_attention_heads})"
            )
        if self.pretrain_steps < 0:
            problems.append(f"`pretrain_steps` must be >= 0, got {self.pretrain_steps}")
        if not self.learning_rate > 0 or self.weight_decay < 0:
            problems.append("`learning_rate` must be > 0 and `weight_decay` >= 0")
        if problems:
            raise ValueError("Invalid SubgrammarConfig: " + "; ".join(problems) + ".")
