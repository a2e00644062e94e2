"""`latentworks demo`: single vs text_mas vs latent_mas on the built-in model and task, as a table; then a
hand-off table, where the information is split across agents: the final agent alone fails, and the
hand-offs succeed only as far as they carry what the other agents hold."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.config import RunConfig, default_threads
from eval.config import EvalConfig
from latent.args import add_config_arguments, config_from_args

# builtin:arith-mini learned latent hand-off with this many thoughts per agent (its card records it);
# other models get `agents.DEFAULT_LATENT_STEPS` through `latentworks eval`.
BUILTIN_LATENT_STEPS = 4
HANDOFF_MODEL = "builtin:arith-mini-v8"
HANDOFF_LEVELS = ("relay", "pick", "sum")
HANDOFF_ROWS = ("no_info", "oracle", "text_mas", "latent_kv", "latent_only", "latent_only_other")


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
    threads: int | None = field(
        default_factory=default_threads,
        metadata={
            "help": "torch CPU threads",
            "default_help": "half this machine's CPUs, at least 1 and at most 8: {default} here",
        },
    )
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "float32 | bfloat16 | float16. Unset: bfloat16 on a CPU that computes it in hardware "
            "(AVX512-BF16 or AMX), where it is faster for every method; otherwise the loader's default "
            "(float32 on CPU, the checkpoint's dtype on GPU)"
        },
    )
    out: str | None = field(default=None, metadata={"help": "output directory (default: runs/demo-<time>)"})
    handoff_model: str = field(
        default=HANDOFF_MODEL, metadata={"help": "model of the hand-off table (trained on the hand-off task)"}
    )
    handoff_limit: int = field(
        default=32, metadata={"help": "hand-off items per level (0: no hand-off table)"}
    )

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
    else None (the loader's default). `bench/studies/latent_mas.py` measures with the same choice."""
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
    if demo.handoff_limit > 0:
        t1 = time.perf_counter()
        table = handoff_table(demo)
        print()
        print(table)
        saved = save_handoff_table(out, table)  # every table the demo prints is kept with its results
        print(f"\nhand-off table in {time.perf_counter() - t1:.0f}s; saved in {saved}")
    return 0


def save_handoff_table(out: Path, table: str) -> Path:
    """Write the hand-off table to `handoff.md` in the run folder (beside report.md); returns the path."""
    from eval.run_state.files import write_new

    path = Path(out) / "handoff.md"
    write_new(path, f"# Hand-off table\n\n{table}\n".encode(), "write the hand-off table")
    return path


def handoff_table(demo: DemoConfig) -> str:
    """Held-out hand-off items per level: the final agent alone (no_info), one agent with every share
    (oracle), and the hand-offs, on `demo.handoff_model`."""
    import torch

    from eval.report import wilson
    from eval.tasks import handoff as th
    from eval.tasks.handoff_rows import MAX_NEW_TOKENS, run_row
    from latent import load_model

    if demo.threads is not None:
        torch.set_num_threads(demo.threads)
    model = load_model(demo.handoff_model)
    lines = [
        f"Hand-off ({demo.handoff_model}, {demo.handoff_limit} held-out items per level, "
        f"{demo.latent_steps} thoughts per holder): accuracy (95% CI)",
        "",
        "| row | " + " | ".join(HANDOFF_LEVELS) + " |",
        "|---|" + "---:|" * len(HANDOFF_LEVELS),
    ]
    cells = {r: [] for r in HANDOFF_ROWS}
    for level in HANDOFF_LEVELS:
        items = th.make_items(level, demo.handoff_limit, "test", seed=0)
        for name in HANDOFF_ROWS:
            r = run_row(model, items, name, demo.latent_steps, MAX_NEW_TOKENS, 16)
            lo, hi = wilson(r.correct, r.n)
            cells[name].append(f"{r.correct}/{r.n} ({100 * lo:.0f}-{100 * hi:.0f}%)")
    lines += [f"| {name} | " + " | ".join(c) + " |" for name, c in cells.items()]
    return "\n".join(lines)
