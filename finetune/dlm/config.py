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
    "BASELINE_METHODS",
    "GRPO_LOSS_TYPES",
    "RETURN_REWARDS",
    "load_config",
    "split_scenario",
]


def split_scenario(default_env: str, scenario: str) -> tuple[str, str]:
    """'rware:tiny-2ag' -> ('rware', 'tiny-2ag'); a bare scenario belongs to `default_env`."""
    env, sep, name = scenario.partition(":")
    return (env, name) if sep else (default_env, scenario)


@dataclass
class DataConfig:
    """Which environments, scenarios and quality tiers the scripted data generator produces."""

    env: str = field(
        default="lbforaging",
        metadata={"help": "'lbforaging', 'mpe' or 'rware': the environment of bare scenario names."},
    )
    scenarios: list[str] = field(
        default_factory=lambda: ["6x6-2p-2f"],
        metadata={"help": "training scenarios; 'env:scenario' (e.g. 'rware:tiny-2ag') mixes environments."},
    )
    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium", "poor"], metadata={"help": "quality tiers."}
    )
    episodes_per_tier: int = field(default=60, metadata={"help": "episodes per scenario and tier."})
    seed: int = 0


@dataclass
class SFTRunConfig:
    """The base model and the supervised fine-tuning run on the generated dialogues."""

    # Parameters that choose the base model
    model: str = field(
        default="scratch",
        metadata={
            "help": "'scratch' (small Llama from config + tokenizer trained on the dialogues), "
            "'builtin:<name>', a local path (e.g. a SmolLM2-135M-Instruct directory), a pulled model name "
            "(`latentworks models pull smollm2-135m-instruct`) or a hub id."
        },
    )
    dtype: str = field(
        default="auto",
        metadata={"help": "'auto' (bf16 on a bf16 GPU, fp16 on other GPUs, fp32 on CPU), 'float32', ..."},
    )
    hidden_size: int = field(default=128, metadata={"help": "scratch model width."})
    num_hidden_layers: int = field(default=4, metadata={"help": "scratch model depth."})
    vocab_size: int = field(default=512, metadata={"help": "scratch tokenizer vocabulary."})
    # Parameters that control training
    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium"], metadata={"help": "tiers used for SFT."}
    )
    teammate_prob: float = field(default=0.3, metadata={"help": "share of samples with teammates' turns."})
    max_samples: int = field(
        default=0, metadata={"help": "train on a random subset of this many samples (0 = all)."}
    )
    epochs: float = 3.0
    learning_rate: float = 1e-3
    warmup_steps: int = field(default=10, metadata={"help": "linear warm-up; the first step has lr 0."})
    batch_size: int = 32
    max_length: int = 512
    lora: bool = field(
        default=False, metadata={"help": "train a LoRA adapter (peft) instead of all weights."}
    )
    lora_r: int = 8
    lora_layers: int = field(
        default=0,
        metadata={
            "help": "LoRA on the top k decoder layers only (0 = all): backward stops below them (CPU)."
        },
    )
    seed: int = 0


GRPO_LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo")
RETURN_REWARDS = ("model", "none", "online")


@dataclass
class GRPORunConfig:
    """The GRPO run on top of the SFT model: TRL settings, reward weights and the return reward."""

    max_steps: int = 60
    num_generations: int = 8
    batch_size: int = 16  # prompts x generations per step must be divisible by num_generations
    learning_rate: float = 2e-4
    loss_type: str = field(
        default="grpo",
        metadata={
            "help": "TRL loss: 'grpo' (Shao et al. 2024, per-sequence mean), 'dr_grpo', 'dapo', 'bnpo'."
        },
    )
    beta: float = field(
        default=0.04,
        metadata={"help": "KL to the SFT (reference) model; 0.04 is the GRPO paper's value, 0 loads none."},
    )
    temperature: float = 1.0
    entropy_coef: float = field(
        default=0.0,
        metadata={
            "help": "entropy bonus in the loss (TRL `entropy_coef`); the starting value when adaptive."
        },
    )
    use_adaptive_entropy: bool = field(
        default=False,
        metadata={
            "help": "Skywork-OR1 adaptive entropy control (TRL): raise the bonus by `entropy_coef_delta` "
            "each step the per-token entropy is at or below `entropy_target`, lower it otherwise."
        },
    )
    entropy_target: float = field(default=0.2, metadata={"help": "nats per completion token (TRL default)."})
    entropy_coef_delta: float = 0.005
    max_completion_length: int = 4
    # weights of format, legality, agreement, return
    reward_weights: list[float] = field(default_factory=lambda: [0.5, 1.0, 1.0, 0.5])
    return_reward: str = field(
        default="model",
        metadata={
            "help": "'model' (offline: return model fit on the dataset), 'none', or 'online' (replays "
            "logged states in the simulator with the scripted expert: NOT offline, comparison only)."
        },
    )
    agreement_tiers: list[str] = field(
        default_factory=lambda: ["good"],
        metadata={"help": "tiers whose actions the agreement reward targets."},
    )
    return_gamma: float = 0.95
    env_horizon: int = field(default=3, metadata={"help": "steps of the online return reward."})
    tiers: list[str] = field(default_factory=lambda: ["good", "medium"], metadata={"help": "prompt tiers."})
    max_prompts: int = 2000
    lora: bool = field(default=False, metadata={"help": "train a LoRA adapter on the SFT model (peft)."})
    lora_r: int = 8
    lora_layers: int = field(default=0, metadata={"help": "as `sft.lora_layers`."})
    use_vllm: bool = field(
        default=False, metadata={"help": "TRL's vLLM generation (GPU, `pip install trl[vllm]`)."}
    )
    score_prompts_once: bool = field(
        default=True,
        metadata={
            "help": "score each distinct prompt once per step, its KV cache shared by its completions "
            "(`latent.group_scoring`; the same values as TRL's per-row scoring up to float rounding); "
            "false: TRL's per-row scoring, with which recipes 1-10 of finetune/dlm/README.md ran."
        },
    )
    seed: int = 0


@dataclass
class EvalConfig:
    """Evaluation episodes, seeds and scenarios (trained and zero-shot) for every method."""

    scenarios: list[str] = field(default_factory=lambda: ["6x6-2p-2f"])
    zero_shot_scenarios: list[str] = field(default_factory=list, metadata={"help": "unseen scenarios."})
    episodes: int = field(
        default=32, metadata={"help": "evaluation episodes per trained model (same start states for all)."}
    )
    seeds: list[int] = field(
        default_factory=lambda: [0], metadata={"help": "start-state groups; episodes x seeds per model."}
    )
    max_new_tokens: int = 4
    prompted_episodes: int = field(
        default=0, metadata={"help": "episodes for the prompted (un-finetuned) LM; 0 = `episodes`."}
    )
    methods: list[str] = field(
        default_factory=list,
        metadata={"help": "evaluate only methods whose label starts with one of these (empty = all)."},
    )
    max_steps: int = field(
        default=0,
        metadata={"help": "truncate evaluation episodes after this many steps (0 = the env's limit)."},
    )
    zero_shot_episodes: int = field(
        default=0, metadata={"help": "episodes per trained model on zero-shot scenarios; 0 = `episodes`."}
    )
    bootstrap_reps: int = field(default=2000, metadata={"help": "stratified-bootstrap resamples (rliable)."})


@dataclass
class BaselineConfig:
    """The offline MARL baselines (BC, CQL, QMIX-CQL, CFCQL) trained on the same data."""

    tiers: list[str] = field(
        default_factory=lambda: ["good", "medium"], metadata={"help": "same as SFT by default."}
    )
    methods: list[str] = field(
        default_factory=lambda: ["bc", "cql", "qmix_cql", "cfcql"],
        metadata={"help": "bc, cql (independent), qmix_cql (QMIX + joint CQL), cfcql (counterfactual CQL)."},
    )
    bc_epochs: int = 30
    cql_steps: int = 3000
    marl_steps: int = field(default=2000, metadata={"help": "gradient steps of qmix_cql and cfcql."})
    cql_alpha: float = 1.0
    gamma: float = 0.95
    hidden: int = 64
    seed: int = 0


BASELINE_METHODS = ("bc", "cql", "qmix_cql", "cfcql")


@dataclass
class DLMConfig:
    """The whole DLM pipeline's configuration; `__post_init__` rejects invalid combinations up front."""

    run_dir: str = "runs/dlm"
    train_seeds: list[int] = field(
        default_factory=lambda: [0],
        metadata={"help": "training seeds of every method (SFT, GRPO, baselines)."},
    )
    data: DataConfig = field(default_factory=DataConfig)
    sft: SFTRunConfig = field(default_factory=SFTRunConfig)
    grpo: GRPORunConfig = field(default_factory=GRPORunConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)

    def __post_init__(self) -> None:
        from finetune.dlm.envs import ENV_NAMES
        from finetune.dlm.policies import TIER_EPS

        p = []
        named = [self.data.env] + [
            split_scenario(self.data.env, sc)[0]
            for sc in self.data.scenarios + self.eval.scenarios + self.eval.zero_shot_scenarios
        ]
        for env in sorted(set(named)):
            if env not in ENV_NAMES:
                p.append(
                    f"environment {env!r} (in `data.env` or a scenario) is unknown (choose from {ENV_NAMES})"
                )
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
        if not self.train_seeds or len(set(self.train_seeds)) != len(self.train_seeds):
            p.append(f"`train_seeds`={self.train_seeds} must be a non-empty list of distinct seeds")
        g = self.grpo
        if g.loss_type not in GRPO_LOSS_TYPES:
            p.append(f"`grpo.loss_type`={g.loss_type!r} must be one of {GRPO_LOSS_TYPES}")
        if g.beta < 0:
            p.append(f"`grpo.beta` must be >= 0, got {g.beta}")
        if g.entropy_coef < 0 or g.entropy_target <= 0 or g.entropy_coef_delta <= 0:
            p.append(
                f"`grpo.entropy_coef`={g.entropy_coef} must be >= 0 and `grpo.entropy_target`="
                f"{g.entropy_target}, `grpo.entropy_coef_delta`={g.entropy_coef_delta} > 0"
            )
        if g.return_reward not in RETURN_REWARDS:
            p.append(f"`grpo.return_reward`={g.return_reward!r} must be one of {RETURN_REWARDS}")
        noisy = sorted({"poor", "random"} & set(g.agreement_tiers))
        if noisy or not g.agreement_tiers:
            p.append(
                f"`grpo.agreement_tiers`={g.agreement_tiers}: agreement must target good behaviour, not the "
                f"mostly random {noisy} tier(s); use e.g. [good] or [good, medium]"
            )
        bad = [m for m in self.baselines.methods if m not in BASELINE_METHODS]
        if bad:
            p.append(f"`baselines.methods` has unknown {bad}; choose from {BASELINE_METHODS}")
        if self.sft.dtype not in ("auto", "float32", "bfloat16", "float16"):
            p.append(f"`sft.dtype`={self.sft.dtype!r} must be auto, float32, bfloat16 or float16")
        if p:
            raise ValueError("invalid DLM config:\n  - " + "\n  - ".join(p))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as nested plain dicts (for saving with a run)."""
        return asdict(self)

    def envs(self) -> list[str]:
        """The environments of the training scenarios, in first-seen order."""
        seen = [split_scenario(self.data.env, sc)[0] for sc in self.data.scenarios]
        return list(dict.fromkeys(seen))


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> DLMConfig:
    """Read a YAML preset (or the defaults) and apply `section.key=value` overrides, typed by OmegaConf."""
    from latent.args import config_from_file

    return config_from_file(DLMConfig, path, overrides or ())
