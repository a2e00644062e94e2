"""Reading an agent's prompt with its shared prefix once vs reading every row in full.

    python bench/speed/prefix_share.py                                  # the built-in model, arith questions
    python bench/speed/prefix_share.py --model smollm2-135m-instruct    # a real checkpoint (after models pull)

Every agent of a batch starts its prompt with the same system text; `WorkingMemory` reads that prefix
once and copies it into every row (`latent.shared_prefix`). Both ways run side by side, interleaved,
on the same batch of prompts per role; we report medians and the ratio's spread over repeats.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import dataclass, field
from functools import partial

from latent.args import add_config_arguments, config_from_args, run_script


@dataclass
class PrefixShareBench:
    """Flags of the shared-prefix timing."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "load_model name or path"})
    task: str = field(default="arith", metadata={"help": "task whose questions fill the prompts"})
    batch_size: int = field(default=25, metadata={"help": "prompts per batch"})
    prompts: str = field(default="compact", metadata={"help": "prompt set"})
    roles: str = field(
        default="math_expert,science_expert,code_expert,planner", metadata={"help": "comma-separated roles"}
    )
    repeats: int = field(default=7, metadata={"help": "interleaved timings per role (after a warm-up)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(PrefixShareBench, ns)
    import torch

    torch.set_num_threads(args.threads)

    from agents import PromptSet
    from eval.tasks import load_task
    from latent import load_model
    from latent.memory import WorkingMemory

    model = load_model(args.model)
    questions = [it.question for it in load_task(args.task, limit=args.batch_size).items]
    prompts = PromptSet.load(args.prompts)
    print(
        f"model {args.model}, {len(questions)} prompts per batch, {platform.machine()}, "
        f"{args.threads} thread(s)\n"
    )
    print("| role | tokens/row | shared prefix | full read ms | shared read ms | full / shared (spread) |")
    print("|------|------------|---------------|--------------|----------------|------------------------|")
    for role in args.roles.split(","):
        enc = model.encode([prompts.messages(role, q) for q in questions])
        times: dict[bool, list[float]] = {True: [], False: []}
        shared = 0
        for _ in range(args.repeats + 1):  # the first round warms up
            for share in (False, True):
                mem = WorkingMemory(model, share_prefixes=share)
                t = time.perf_counter()
                mem.write_tokens(role, "prompt", enc["input_ids"], enc["attention_mask"], None, [])
                times[share].append(time.perf_counter() - t)
                if share:
                    seg = mem.segments[0]
                    shared = int(seg.mask.all(0).long().cumprod(0).sum())
        full, fast = times[False][1:], times[True][1:]
        ratios = sorted(f / s for f, s in zip(full, fast))
        per_row = float(enc["attention_mask"].sum(1).float().mean())
        print(
            f"| {role} | {per_row:.0f} | {shared} | {1000 * statistics.median(full):.1f} | "
            f"{1000 * statistics.median(fast):.1f} | {statistics.median(ratios):.2f}x "
            f"({ratios[0]:.2f}-{ratios[-1]:.2f}) |"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/prefix_share.py", __doc__, partial(add_config_arguments, cls=PrefixShareBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
