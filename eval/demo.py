"""`latentworks demo`: single vs text_mas vs latent_mas on the built-in model and task, as a table."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from agents.config import RunConfig, default_threads
from eval.config import EvalConfig
from latentworks.args import add_config_arguments, config_from_args

# builtin:arith-mini learned latent hand-off with this many thoughts per agent (its card records it);
# other models get `agents.DEFAULT_LATENT_STEPS` through `latentworks eval`.
BUILTIN_LATENT_STEPS = 4


@dataclass
class DemoConfig:
    """The demo's few knobs; everything else is `latentworks eval`'s default."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "path, hub id or builtin:<name>"})
    limit: int = field(default=32, metadata={"help": "held-out problems"})
    graph: str = field(default="sequential", metadata={"help": "sequential | hierarchical | graph file"})
    latent_steps: int = field(
        default=BUILTIN_LATENT_STEPS,
        metadata={"help": "latent thoughts per agent (the built-in model was trained with 4)"},
    )
    prompts: str | None = field(
        default=None,
        metadata={
            "help": "prompt set: compact (latent_mas agents that read the memory are not given the question "
            "again) or default (every agent re-reads it, as in the paper). Unset: compact for the built-in "
            "model, which was trained on both; default for any other model (untrained models fail with compact)"
        },
    )
    max_new_tokens: int = field(default=96, metadata={"help": "decode budget per decoding agent"})
    threads: int | None = field(default_factory=default_threads, metadata={"help": "torch CPU threads"})
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "float32 | bfloat16 | float16. Unset: bfloat16 on a CPU that computes it in hardware "
            "(AVX512-BF16 or AMX), where it is faster for every method; otherwise the loader's default "
            "(float32 on CPU, the checkpoint's dtype on GPU)"
        },
    )
    out: str | None = field(default=None, metadata={"help": "output directory (default: runs/demo-<time>)"})

    def eval_config(self) -> EvalConfig:
        """The `EvalConfig` this demo runs (validated like any eval run)."""
        run = RunConfig(
            latent_steps=self.latent_steps,
            max_new_tokens=self.max_new_tokens,
            batch_size=16,
            threads=self.threads,
            prompts=self.prompts or ("compact" if self.model == "builtin:arith-mini" else "default"),
        )
        out = self.out or time.strftime("runs/demo-%Y%m%d-%H%M%S")
        return EvalConfig(
            model=self.model,
            task="arith",
            graph=self.graph,
            limit=self.limit,
            dtype=self.dtype or demo_dtype(),
            run=run,
            out=out,
        )


def demo_dtype() -> str | None:
    """The demo's dtype when none is asked for: bfloat16 when it will run on a CPU with hardware bf16,
    else None (the loader's default). `bench/latent_mas.py` measures with the same choice."""
    import torch

    from latent.loading import native_bf16_cpu

    return "bfloat16" if not torch.cuda.is_available() and native_bf16_cpu() else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DemoConfig)


def run(args: argparse.Namespace) -> int:
    from eval.report import print_report
    from eval.runner import evaluate

    t0 = time.perf_counter()
    demo = config_from_args(DemoConfig, args)
    cfg = demo.eval_config()
    out = evaluate(cfg)
    print()
    print_report(out)
    print(
        f"\n{demo.limit} held-out problems x 3 methods in {time.perf_counter() - t0:.0f}s; results in {out}"
    )
    return 0
