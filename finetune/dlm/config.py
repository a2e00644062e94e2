"""Configuration dataclasses for the DLM pipeline; one `DLMConfig` drives Python calls, the CLI and YAML presets.

A YAML preset mirrors the nesting (`data:`, `sft:`, `grpo:`, `eval:`, `baselines:`); the CLI's
`--set sft.epochs=2` overrides single fields. Every problem in a config is reported in one error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BaselineConfig",
    "DLMConfig",
    "DataConfig",
    "EvalConfig",
    "GRPORunConfig",
    "SFTRunConfig",
    "load_config",
]


@dataclass
class DataConfig:
    env: str = field(default="lbforaging", metadata={"help": "'lbforaging' or 'mpe'."})
    scenarios: list[str] = field(
        default_factory=lambda: ["6x6-2p-2f"], metadata={"help": "training scenarios."}
    )
    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium", "poor"], metadata={"help": "quality tiers."}
    )
    episodes_per_tier: int = field(default=60, metadata={"help": "episodes per scenario and tier."})
    seed: int = 0


@dataclass
class SFTRunConfig:
    # Parameters that choose the base model
    model: str = field(
        default="scratch",
        metadata={
            "help": "'scratch' (small Llama from config + tokenizer trained on the dialogues), "
            "'builtin:<name>', a local path or a hub id."
        },
    )
    hidden_size: int = field(default=128, metadata={"help": "scratch model width."})
    num_hidden_layers: int = field(default=4, metadata={"help": "scratch model depth."})
    vocab_size: int = field(default=512, metadata={"help": "scratch tokenizer vocabulary."})
    # Parameters that control training
    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium"], metadata={"help": "tiers used for SFT."}
    )
    teammate_prob: float = field(default=0.3, metadata={"help": "share of samples with teammates' turns."})
    epochs: float = 3.0
    learning_rate: float = 1e-3
    warmup_steps: int = field(default=10, metadata={"help": "linear warm-up; the first step has lr 0."})
    batch_size: int = 32
    max_length: int = 512
    lora: bool = field(
        default=False, metadata={"help": "train a LoRA adapter (peft) instead of all weights."}
    )
    lora_r: int = 8
    seed: int = 0


@dataclass
class GRPORunConfig:
    max_steps: int = 60
    num_generations: int = 8
    batch_size: int = 16  # prompts x generations per step must be divisible by num_generations
    learning_rate: float = 2e-4
    beta: float = field(default=0.0, metadata={"help": "KL to the SFT model; 0 loads no reference model."})
    temperature: float = 1.0
    max_completion_length: int = 4
    # weights of format, legality, agreement, short-horizon env return
    reward_weights: list[float] = field(default_factory=lambda: [0.5, 1.0, 1.0, 0.5])
    env_horizon: int = field(
        default=3, metadata={"help": "steps of the short-horizon return reward (0 = off)."}
    )
    tiers: list[str] = field(default_factory=lambda: ["good", "medium", "poor"])
    max_prompts: int = 2000
    seed: int = 0


@dataclass
class EvalConfig:
    scenarios: list[str] = field(default_factory=lambda: ["6x6-2p-2f"])
    zero_shot_scenarios: list[str] = field(default_factory=list, metadata={"help": "unseen scenarios."})
    episodes: int = 20
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    max_new_tokens: int = 4


@dataclass
class BaselineConfig:
    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium"], metadata={"help": "same as SFT by default."}
    )
    bc_epochs: int = 30
    cql_steps: int = 3000
    cql_alpha: float = 1.0
    gamma: float = 0.95
    hidden: int = 64
    seed: int = 0


@dataclass
class DLMConfig:
    run_dir: str = "runs/dlm"
    data: DataConfig = field(default_factory=DataConfig)
    sft: SFTRunConfig = field(default_factory=SFTRunConfig)
    grpo: GRPORunConfig = field(default_factory=GRPORunConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)

    def __post_init__(self) -> None:
        from finetune.dlm.envs import ENV_NAMES
        from finetune.dlm.policies import TIER_EPS

        p = []
        if self.data.env not in ENV_NAMES:
            p.append(f"`data.env`={self.data.env!r} is unknown (choose from {ENV_NAMES})")
        if not self.data.scenarios:
            p.append("`data.scenarios` is empty")
        for name, tiers in (
            ("data", self.data.tiers),
            ("sft", self.sft.tiers),
            ("grpo", self.grpo.tiers),
            ("baselines", self.baselines.tiers),
        ):
            bad = [t for t in tiers if t not in TIER_EPS]
            if bad or not tiers:
                p.append(f"`{name}.tiers`={tiers} must be a non-empty subset of {sorted(TIER_EPS)}")
        for name, val in (
            ("data.episodes_per_tier", self.data.episodes_per_tier),
            ("sft.batch_size", self.sft.batch_size),
            ("grpo.max_steps", self.grpo.max_steps),
            ("eval.episodes", self.eval.episodes),
            ("baselines.cql_steps", self.baselines.cql_steps),
            ("sft.hidden_size", self.sft.hidden_size),
        ):
            if val < 1:
                p.append(f"`{name}` must be >= 1, got {val}")
        if self.sft.epochs <= 0 or self.sft.learning_rate <= 0 or self.grpo.learning_rate <= 0:
            p.append("`sft.epochs`, `sft.learning_rate` and `grpo.learning_rate` must be > 0")
        if self.grpo.num_generations < 2 or self.grpo.batch_size % self.grpo.num_generations:
            p.append(
                f"`grpo.batch_size`={self.grpo.batch_size} must be a multiple of `grpo.num_generations`="
                f"{self.grpo.num_generations} (>= 2)"
            )
        if len(self.grpo.reward_weights) != 4:
            p.append("`grpo.reward_weights` needs 4 weights (format, legality, agreement, env return)")
        if not 0 <= self.sft.teammate_prob <= 1:
            p.append(f"`sft.teammate_prob` must be in [0, 1], got {self.sft.teammate_prob}")
        if not self.eval.seeds:
            p.append("`eval.seeds` is empty")
        if p:
            raise ValueError("invalid DLM config:\n  - " + "\n  - ".join(p))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> DLMConfig:
    """Read a YAML preset (or the defaults) and apply `section.key=value` overrides, typed by OmegaConf."""
    import argparse

    from latentworks.args import config_from_args

    args = argparse.Namespace(config=str(path) if path is not None else None, overrides=list(overrides or []))
    return config_from_args(DLMConfig, args)
