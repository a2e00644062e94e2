"""`ProbeConfig`: the settings of `latentworks probe <experiment>`. Light on purpose (no torch), so the
command line builds its flags and validates a run before anything heavy is imported."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EXPERIMENTS", "ProbeConfig"]

EXPERIMENTS = ("e1", "e2", "e3", "organisms")


@dataclass
class ProbeConfig:
    """Settings for `latentworks probe <experiment>`; the CLI flags are built from these fields."""

    # What to run on
    experiment: str = field(default="e1", metadata={"help": f"one of {EXPERIMENTS}"})
    model: str = field(
        default="builtin:arith-mini-v3", metadata={"help": "model path, hub id or builtin:<name>"}
    )
    out: str = field(
        default="runs/probes", metadata={"help": "output directory (a sub-folder per experiment)"}
    )
    device: str | None = field(default=None, metadata={"help": "cpu / cuda (default: cuda when available)"})
    threads: int = field(
        default=1, metadata={"help": "torch CPU threads (1 avoids oversubscription on busy CPUs)"}
    )
    # Data
    n: int = field(default=16, metadata={"help": "items per generator / requests per condition"})
    seed: int = field(default=0, metadata={"help": "data and bootstrap seed"})
    template: str = field(
        default="short", metadata={"help": "scenario system prompt: short (small LMs) or full (7B+)"}
    )
    requests: str | None = field(
        default=None, metadata={"help": "local .txt/.csv of requests (default: arithmetic placeholders)"}
    )
    cue_sample: bool = field(
        default=False,
        metadata={
            "help": "E1: one seeded (training/unmonitored cue, researcher) combination per request, under all "
            "three assertions (3 prompts per request instead of 12), so n can reach 100+ on a CPU"
        },
    )
    elicit: bool = field(
        default=True,
        metadata={"help": "E1: also ask the model for P(evaluation) (one extra forward per prompt)"},
    )
    # Probing
    layers: list[int] | None = field(
        default=None, metadata={"help": "decoder layers to read (default: all, or 8 spread)"}
    )
    batch_size: int = field(default=32, metadata={"help": "prompts per forward pass"})
    n_boot: int = field(default=200, metadata={"help": "bootstrap resamples for CIs"})
    # Generation and steering
    max_new_tokens: int = field(
        default=48, metadata={"help": "reply length for answers and spoken awareness"}
    )
    af_max_new_tokens: int = field(
        default=24, metadata={"help": "reply length when only the accept/reject tag is judged"}
    )
    steer_layers: int = field(
        default=3,
        metadata={
            "help": "how many (evenly spaced) scanned layers the organism steering visits one at a time "
            "(0: only the every-layer edits)"
        },
    )
    alphas: list[float] = field(
        default_factory=lambda: [-1.0, -0.5, 0.5, 1.0],
        metadata={"help": "steering strengths (x mean residual norm)"},
    )
    steer: bool = field(
        default=True, metadata={"help": "E2: run the steering sweep and cross-effects (the costly part)"}
    )
    steer_n: int | None = field(
        default=None,
        metadata={
            "help": "E2: items per steering behaviour set; organisms: held-out requests that are steered "
            "(default: n); steering costs most"
        },
    )
    heldout_assertions: str = field(
        default="all",
        metadata={
            "help": "organisms: held-out prompts under all three assertions, or 'none' only (4 prompts per "
            "request instead of 12; the organisms are trained to ignore the assertion)"
        },
    )
    resume: bool = field(
        default=False,
        metadata={
            "help": "organisms: reuse the adapters and finished measurements an earlier run with the same "
            "settings saved under out/organisms/<kind>/ (a LoRA trained for fewer epochs is extended)"
        },
    )
    ppl_tol: float = field(
        default=1.5, metadata={"help": "coherence guard: max perplexity ratio on neutral text"}
    )
    judge: str | None = field(
        default=None, metadata={"help": "local model path for an LLM eval-awareness judge"}
    )
    # LoRA fine-tunes (E3, organisms)
    lora_r: int = field(default=16, metadata={"help": "LoRA rank"})
    lora_lr: float = field(default=2e-3, metadata={"help": "LoRA learning rate"})
    lora_epochs: float = field(default=4.0, metadata={"help": "LoRA epochs"})
    lora_embeddings: bool = field(
        default=True,
        metadata={
            "help": "also train the token embeddings / tied output head (peft modules_to_save): a tiny LM "
            "needs it to emit new words; turn off (--no-lora-embeddings) for 7B+ models"
        },
    )
    train_requests: int = field(
        default=16, metadata={"help": "scenario requests in the organism training set"}
    )
    train_sycophancy: int = field(
        default=96,
        metadata={
            "help": "sycophancy problems in the fine-tune sets (with 24 the built-in model memorised the "
            "claims instead of learning to copy them)"
        },
    )

    def __post_init__(self) -> None:
        errors = []
        if self.experiment not in EXPERIMENTS:
            errors.append(f"`experiment`={self.experiment!r} is not one of {EXPERIMENTS}")
        if self.n < 4:
            errors.append(f"`n`={self.n} must be >= 4 (bootstrap and split-half need a few items per class)")
        if self.heldout_assertions not in ("all", "none"):
            errors.append(f"`heldout_assertions`={self.heldout_assertions!r} must be 'all' or 'none'")
        if self.template not in ("short", "full"):
            errors.append(f"`template`={self.template!r} must be 'short' or 'full'")
        for name in (
            "batch_size",
            "n_boot",
            "max_new_tokens",
            "lora_r",
            "train_requests",
            "train_sycophancy",
            "threads",
        ):
            if getattr(self, name) < 1:
                errors.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.steer_n is not None and self.steer_n < 2:
            errors.append(f"`steer_n`={self.steer_n} must be >= 2 (or unset to use n)")
        if not self.alphas:
            errors.append("`alphas` is empty")
        if self.ppl_tol < 1:
            errors.append(f"`ppl_tol`={self.ppl_tol} must be >= 1")
        if self.lora_lr <= 0 or self.lora_epochs <= 0:
            errors.append("`lora_lr` and `lora_epochs` must be > 0")
        if self.requests is not None and not Path(self.requests).is_file():
            errors.append(f"`requests` file {self.requests!r} does not exist")
        if errors:
            raise ValueError("invalid probe config: " + "; ".join(errors) + ".")
