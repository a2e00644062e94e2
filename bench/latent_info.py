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

import torch

from eval.report import wilson
from finetune import fact_handoff as fh


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct", help="name, path, or a LoRA adapter dir")
    p.add_argument("--realign", default="ridge", help="'ridge', 'identity' or an aligner .safetensors")
    p.add_argument("--n", type=int, default=32, help="held-out problems")
    p.add_argument("--seed", type=int, default=9001, help="seed of the held-out problems")
    p.add_argument("--steps", type=int, default=4, help="latent thoughts the reader hands on")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--methods", default=",".join(fh.METHODS + fh.ABLATIONS))
    args = p.parse_args(argv)
    methods = args.methods.split(",")
    bad = sorted(set(methods) - set(fh.METHODS + fh.ABLATIONS))
    if bad:
        p.error(f"unknown methods {bad}; choose from {fh.METHODS + fh.ABLATIONS}")
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


if __name__ == "__main__":
    raise SystemExit(main())
