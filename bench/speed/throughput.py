"""Throughput (questions per second) against batch size for single, text_mas and latent_mas.

    python bench/speed/throughput.py --model smollm2-135m-instruct --batches 1,2,4,8,16,32 --questions 32 \
        --plot bench/results/throughput_smollm2.png --json bench/results/throughput_smollm2.json

Every method runs the sequential graph (single: the final agent alone) on the same rg:gsm_symbolic
questions, greedy, in `--dtype` (default: the project's CPU default, bfloat16 on a CPU with hardware
bf16, as `latentworks demo`; `--dtype float32` otherwise). At each batch size the three methods run one after another in a rotating
order, so load from other jobs on a shared machine is spread over all three.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from latent.args import UsageError, add_config_arguments, config_from_args, run_script  # noqa: E402

METHODS = ("single", "text_mas", "latent_mas")


def _save(args, rows: list[dict]) -> None:
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": asdict(args), "rows": rows}, indent=1))
    if args.plot:
        plot(rows, args.plot, f"{args.model}, {args.dtype}, sequential, {args.threads} thread(s)")


def plot(rows: list[dict], path: str, title: str) -> None:
    """questions/s against batch size, one line per method (log2 batch axis)."""
    from latent.plotting import figure, save_figure

    batches = [r["batch"] for r in rows]
    fig, ax = figure(figsize=(6, 4), extra="eval")
    for mth in METHODS:
        ax.plot(batches, [r[mth] for r in rows], marker="o", label=mth)
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch size")
    ax.set_ylabel("questions / s")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=120)


@dataclass
class ThroughputBench:
    """Flags of the throughput table."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    batches: str = field(default="1,2,4,8,16,32", metadata={"help": "comma-separated batch sizes"})
    questions: int = field(
        default=32, metadata={"help": "rg:gsm_symbolic questions per method and batch size"}
    )
    steps: int = field(default=8, metadata={"help": "latent steps per agent (latent_mas)"})
    max_new_tokens: int = field(default=32, metadata={"help": "decode budget per decoding agent"})
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "model dtype (default: bfloat16 on a CPU with hardware bf16, as the demo, else float32)",
            "choices": ("float32", "bfloat16"),
        },
    )
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    plot: str | None = field(default=None, metadata={"help": "write a PNG plot here"})
    json: str | None = field(default=None, metadata={"help": "write the rows (and these settings) here"})

    def __post_init__(self) -> None:
        batches = [int(b) for b in self.batches.split(",")]
        if self.questions < max(batches):
            raise UsageError(f"--questions {self.questions} is smaller than the largest batch {max(batches)}")


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(ThroughputBench, ns)
    batches = [int(b) for b in args.batches.split(",")]
    import torch

    torch.set_num_threads(args.threads)

    import agents
    from agents.config import RunConfig
    from eval.demo import demo_dtype
    from eval.tasks import load_task
    from latent import load_model

    args.dtype = args.dtype or demo_dtype() or "float32"
    m = load_model(args.model, dtype=args.dtype)
    questions = [it.question for it in load_task("rg:gsm_symbolic", limit=args.questions).items]
    agents.run(
        "sequential", m, questions[:1], method="latent_mas", latent_steps=1, max_new_tokens=2
    )  # warm-up
    rows = []
    print(
        f"model {args.model}, {args.dtype}, {args.threads} thread(s), {args.questions} questions, "
        f"{args.steps} latent steps, up to {args.max_new_tokens} new tokens per decoding agent"
    )
    print(f"{'batch':>5} | " + " | ".join(f"{mth + ' q/s':>14}" for mth in METHODS) + " | tokens (s/t/l)")
    for i, b in enumerate(batches):
        order = METHODS[i % 3 :] + METHODS[: i % 3]
        rec = {"batch": b}
        for mth in order:
            cfg = RunConfig(
                method=mth,
                latent_steps=args.steps,
                max_new_tokens=args.max_new_tokens,
                batch_size=b,
                threads=None,
            )
            t0 = time.perf_counter()
            res = agents.run("sequential", m, questions, config=cfg)
            dt = time.perf_counter() - t0
            rec[mth] = len(questions) / dt
            rec[mth + "_tokens"] = sum(r.output_tokens for r in res) / len(res)
        rows.append(rec)
        toks = "/".join(f"{rec[mth + '_tokens']:.0f}" for mth in METHODS)
        print(f"{b:>5} | " + " | ".join(f"{rec[mth]:>14.3f}" for mth in METHODS) + f" | {toks}", flush=True)
        _save(args, rows)  # after every row: a run stopped early keeps what it measured
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/throughput.py", __doc__, partial(add_config_arguments, cls=ThroughputBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
