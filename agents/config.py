"""`RunConfig`: how `agents.run` executes a graph. Light on purpose (no torch), so the command line can
build its flags and validate a run before anything heavy is imported."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

METHODS = ("single", "text_mas", "latent_mas")
BACKENDS = ("hf", "vllm")
# Controls of latent_mas: random = same-norm random vectors fed as thoughts; other = the final agent reads
# another question's memory (rows of the batch deranged); mean = every row reads the batch-mean memory.
THOUGHTS = ("real", "random", "other", "mean")
# The paper sweeps 0-80 latent steps and the authors' released run script used 20 ("20-40 works well");
# 0 would silently discard all upstream memory, so it is never the default. Tune per task.
DEFAULT_LATENT_STEPS = 20
# Qwen3's model card asks for 32,768 new tokens when it thinks; 1,024 keeps a batch affordable and still
# lets short reasoning finish. A thinking agent decodes up to this plus `max_new_tokens`.
DEFAULT_THINKING_BUDGET = 1024
_CUDA_LIST = re.compile(r"cuda(:\d+)?(,cuda:\d+)*")


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
    max_new_tokens: int = field(
        default=256, metadata={"help": "decode budget per decoding agent (its answer, after any thinking)"}
    )
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
    # Thinking models (chat templates with a <think> block, e.g. Qwen3)
    enable_thinking: bool | None = field(
        default=None,
        metadata={
            "help": "the chat template's thinking switch (Qwen3): --enable-thinking / --no-enable-thinking; "
            "default: the template's own (Qwen3 thinks)"
        },
    )
    thinking_budget: int = field(
        default=DEFAULT_THINKING_BUDGET,
        metadata={
            "help": "tokens a decoding agent may think before </think> is forced; a thinking agent decodes "
            "up to this plus --max-new-tokens"
        },
    )
    # vLLM engine (backend='vllm'); the HF model doing the latent work stays where it was loaded
    vllm_gpu_memory_utilization: float | None = field(
        default=None,
        metadata={
            "help": "share of the GPU's memory vLLM may claim",
            "default_help": "0.9 on a GPU of its own; on the HF model's GPU half of what is free at start",
        },
    )
    vllm_device: str | None = field(
        default=None,
        metadata={
            "help": "GPU(s) for the vLLM engine, e.g. cuda:1 (one per tensor-parallel rank: cuda:1,cuda:2); "
            "default: the HF model's device"
        },
    )
    vllm_tensor_parallel_size: int = field(default=1, metadata={"help": "GPUs vLLM shards the model over"})
    vllm_enforce_eager: bool | None = field(
        default=None,
        metadata={"help": "disable CUDA graphs in vLLM; default: only on a CPU, where they do not apply"},
    )

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
        if not isinstance(self.thinking_budget, int) or self.thinking_budget < 1:
            problems.append(f"`thinking_budget` must be an integer >= 1, got {self.thinking_budget!r}")
        problems += self._vllm_problems()
        if problems:
            raise ValueError("invalid RunConfig: " + "; ".join(problems) + ".")

    def _vllm_problems(self) -> list[str]:
        """The vLLM engine settings, checked before anything loads."""
        problems = []
        util = self.vllm_gpu_memory_utilization
        if util is not None and not 0 < util <= 1:
            problems.append(f"`vllm_gpu_memory_utilization` must be in (0, 1], got {util}; e.g. 0.45")
        if not isinstance(self.vllm_tensor_parallel_size, int) or self.vllm_tensor_parallel_size < 1:
            problems.append(
                f"`vllm_tensor_parallel_size` must be an integer >= 1, got {self.vllm_tensor_parallel_size!r}"
            )
        if self.vllm_device is not None:
            devices = self.vllm_device.split(",")
            if not _CUDA_LIST.fullmatch(self.vllm_device) or (len(devices) > 1 and "cuda" in devices):
                problems.append(
                    f"`vllm_device` must be cuda, cuda:N or a list cuda:N,cuda:M, got {self.vllm_device!r}"
                )
            elif len(devices) > 1 and len(devices) != self.vllm_tensor_parallel_size:
                problems.append(
                    f"`vllm_device` lists {len(devices)} GPUs but `vllm_tensor_parallel_size` is "
                    f"{self.vllm_tensor_parallel_size}; list one GPU per rank or set --vllm-tensor-parallel-size"
                )
        given = [
            name
            for name, default in (
                ("vllm_gpu_memory_utilization", None),
                ("vllm_device", None),
                ("vllm_tensor_parallel_size", 1),
                ("vllm_enforce_eager", None),
            )
            if getattr(self, name) != default
        ]
        if given and self.backend != "vllm":
            problems.append(
                f"{', '.join(f'`{g}`' for g in given)} set the vLLM engine, which backend={self.backend!r} does "
                "not start; pass --backend vllm or drop them"
            )
        return problems
