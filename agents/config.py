"""`RunConfig`: how `agents.run` executes a graph. Light on purpose (no torch), so the command line can
build its flags and validate a run before anything heavy is imported."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

METHODS = ("single", "text_mas", "latent_mas")
BACKENDS = ("hf", "vllm")
# Controls of latent_mas: random = same-norm random vectors fed as thoughts; other = the final agent reads
# another question's memory (rows of the batch deranged); mean = every row reads the batch-mean memory.
THOUGHTS = ("real", "random", "other", "mean")
# The paper sweeps 0-80 latent steps and the authors' released run script used 20 ("20-40 works well");
# 0 would silently discard all upstream memory, so it is never the default. Tune per task.
DEFAULT_LATENT_STEPS = 20


def default_threads() -> int:
    """Half the CPUs this process may use (at least 1, at most 8): torch's default of one thread per
    core oversubscribes a shared machine (a busy 2-core CPU ran 10-25x slower than with 1 thread)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // 2))


@dataclass
class RunConfig:
    """How `agents.run` executes a graph. The same fields drive the Python API and the CLI."""

    # Method
    method: str = field(default="latent_mas", metadata={"help": "which method runs", "choices": METHODS})
    latent_steps: int = field(default=DEFAULT_LATENT_STEPS, metadata={"help": "latent thoughts per agent"})
    prompts: str = field(
        default="default",
        metadata={"help": "prompt set: default, compact (see agents/prompts) or a YAML path"},
    )
    thoughts: str = field(
        default="real",
        metadata={
            "help": "latent_mas control: random (same-norm random thoughts), other (the final agent reads "
            "another question's memory), mean (every question reads the batch-mean memory)",
            "choices": THOUGHTS,
        },
    )
    # Decoding (final agent; also every agent of text_mas)
    max_new_tokens: int = field(default=256, metadata={"help": "decode budget per decoding agent"})
    do_sample: bool = field(default=False, metadata={"help": "sample instead of greedy"})
    temperature: float = field(default=0.6, metadata={"help": "sampling temperature"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling"})
    seed: int = field(default=0, metadata={"help": "task generation and sampling seed"})
    # Execution
    batch_size: int = field(default=8, metadata={"help": "questions per batch"})
    backend: str = field(
        default="hf",
        metadata={"help": "final-agent decoder (vllm needs the [vllm] extra)", "choices": BACKENDS},
    )
    inspect_latents: int = field(
        default=0, metadata={"help": "> 0: record the logit-lens top-k tokens of every latent thought"}
    )
    threads: int | None = field(
        default_factory=default_threads,
        metadata={
            "help": "torch CPU threads",
            "default_help": "half this machine's CPUs, at least 1 and at most 8: {default} here",
        },
    )
    progress: bool = field(default=False, metadata={"help": "progress bar over batches"})

    def __post_init__(self) -> None:
        problems = []
        if self.method not in METHODS:
            problems.append(f"`method` must be one of {METHODS}, got {self.method!r}")
        if not isinstance(self.latent_steps, int) or self.latent_steps < 0:
            problems.append(f"`latent_steps` must be an integer >= 0, got {self.latent_steps!r}")
        if self.max_new_tokens < 1:
            problems.append(f"`max_new_tokens` must be >= 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            problems.append(f"`batch_size` must be >= 1, got {self.batch_size}")
        if self.thoughts not in THOUGHTS:
            problems.append(f"`thoughts` must be one of {THOUGHTS}, got {self.thoughts!r}")
        if self.backend not in BACKENDS:
            problems.append(f"`backend` must be 'hf' or 'vllm', got {self.backend!r}")
        if self.do_sample and self.temperature <= 0:
            problems.append(f"`temperature` must be > 0 when sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            problems.append(f"`top_p` must be in (0, 1], got {self.top_p}")
        if self.inspect_latents < 0:
            problems.append(f"`inspect_latents` must be >= 0, got {self.inspect_latents}")
        if self.threads is not None and self.threads < 1:
            problems.append(f"`threads` must be >= 1, got {self.threads}")
        if problems:
            raise ValueError("invalid RunConfig: " + "; ".join(problems) + ".")
