"""Does the latent memory carry information? The fact hand-off task with ablations.

    python bench/latent_info.py --model smollm2-135m-instruct --n 32 --steps 4
    python bench/latent_info.py --model runs/smollm2-latent-fact/adapter \
        --realign runs/smollm2-latent-fact/aligner.safetensors --n 32 --steps 4

A reader agent sees a fact ("Ann's locker code is 47.") that the answerer's prompt lacks; the only channel
is the reader -> answerer edge (`finetune/fact_handoff.py`). Accuracy of the answerer under each hand-off,
with Wilson 95% intervals: real latent thoughts vs same-norm random thoughts, another question's memory,
the thought vectors alone, no hand-off (single) and text hand-off (text_mas). For `other_question` the
table also counts answers that match the *other* question's fact (information that went to the wrong
place is still information).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from functools import partial

from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class LatentInfoBench:
    """Flags of the fact hand-off benchmark."""

    model: str = field(
        default="smollm2-135m-instruct", metadata={"help": "name, path, or a LoRA adapter dir"}
    )
    realign: str = field(default="ridge", metadata={"help": "'ridge', 'identity' or an aligner .safetensors"})
    n: int = field(default=32, metadata={"help": "held-out problems"})
    seed: int = field(default=9001, metadata={"help": "seed of the held-out problems"})
    steps: int = field(default=4, metadata={"help": "latent thoughts the reader hands on"})
    batch_size: int = field(default=16, metadata={"help": "problems per batch"})
    methods: str = field(
        default="",
        metadata={
            "help": "comma-separated hand-offs (default: every finetune.fact_handoff method and ablation)"
        },
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(LatentInfoBench, ns)
    import torch

    from eval.report import wilson
    from finetune import fact_handoff as fh

    known = fh.METHODS + fh.ABLATIONS
    methods = args.methods.split(",") if args.methods else list(known)
    bad = sorted(set(methods) - set(known))
    if bad:
        raise UsageError(f"unknown methods {bad}; choose from {known}")
    from latent import load_model

    torch.manual_seed(0)
    m = load_model(args.model, device="cpu", realign=args.realign)
    probs = fh.make_problems(args.n, args.seed)
    print(f"model {args.model} | realign {args.realign} | {args.n} problems | {args.steps} latent steps")
    print(
        f"{'hand-off':<16} | {'correct':>8} | {'acc':>6} | {'95% CI':>13} | {'other fact':>10} | {'wall s':>6}"
    )
    print("-" * 76)
    for method in methods:
        t0 = time.perf_counter()
        texts = fh.run_handoff(m, probs, method, args.steps, batch_size=args.batch_size, seed=0)
        ok = fh.score(probs, texts)
        lo, hi = wilson(sum(ok), len(ok))
        other = "-"
        if method == "other_question":
            other = str(sum(fh.score(fh.donors(probs, args.batch_size, 0), texts)))
        print(
            f"{method:<16} | {sum(ok):>3}/{len(ok):<4} | {100 * sum(ok) / len(ok):>5.1f}% | "
            f"{100 * lo:>5.1f}-{100 * hi:>5.1f}% | {other:>10} | {time.perf_counter() - t0:>6.0f}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/latent_info.py", __doc__, partial(add_config_arguments, cls=LatentInfoBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
