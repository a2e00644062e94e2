"""`latentworks demo`: single vs text_mas vs latent_mas on the built-in model and task, as a table."""

from __future__ import annotations

import argparse
import time

from eval.runner import EvalConfig, evaluate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="builtin:arith-mini", help="path, hub id or builtin:<name>")
    parser.add_argument("--limit", type=int, default=32, help="held-out problems")
    parser.add_argument("--graph", default="sequential", help="sequential | hierarchical | graph file")
    parser.add_argument("--latent-steps", type=int, default=None, help="default: the agents' default")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="decode budget per decoding agent")
    parser.add_argument("--out", default=None, help="default: runs/demo-<time>")


def run(args: argparse.Namespace) -> int:
    from eval.report import print_report

    t0 = time.perf_counter()
    kwargs = {} if args.latent_steps is None else {"latent_steps": args.latent_steps}
    cfg = EvalConfig(
        model=args.model,
        task="arith",
        graph=args.graph,
        limit=args.limit,
        max_new_tokens=args.max_new_tokens,
        batch_size=16,
        out=args.out or time.strftime("runs/demo-%Y%m%d-%H%M%S"),
        **kwargs,
    )
    out = evaluate(cfg)
    print()
    print_report(out)
    print(
        f"\n{args.limit} held-out problems x 3 methods in {time.perf_counter() - t0:.0f}s; results in {out}"
    )
    return 0
