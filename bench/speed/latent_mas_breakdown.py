"""Where one method's time goes on a graph: seconds in prompt reads, latent thoughts and decoding.

    python bench/speed/latent_mas_breakdown.py                            # hierarchical, compact, latent_mas + text_mas
    python bench/speed/latent_mas_breakdown.py --graph sequential --limit 50

Times every `LatentModel.prefill`, `think` and `generate` call of one `agents.run` (after a warm-up batch)
and the cached positions each decoding call starts from, so a slow final agent can be told apart from
slow prompt reads.
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import dataclass, field
from functools import partial

from latent.args import add_config_arguments, config_from_args, run_script


@dataclass
class BreakdownBench:
    """Flags of the time breakdown."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "load_model name or path"})
    task: str = field(default="arith", metadata={"help": "any `latentworks eval --list-tasks` name"})
    graph: str = field(default="hierarchical", metadata={"help": "preset or graph file"})
    methods: str = field(default="latent_mas,text_mas", metadata={"help": "comma-separated methods"})
    limit: int = field(default=100, metadata={"help": "problems"})
    prompts: str = field(default="compact", metadata={"help": "prompt set"})
    latent_steps: int = field(default=4, metadata={"help": "latent steps per agent"})
    batch_size: int = field(default=25, metadata={"help": "problems per batch"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(BreakdownBench, ns)
    import torch

    torch.set_num_threads(args.threads)

    import agents
    from agents.config import RunConfig
    from eval.tasks import load_task
    from latent import LatentModel, load_model

    model = load_model(args.model)
    questions = [it.question for it in load_task(args.task, limit=args.limit).items]
    seconds: dict[str, float] = collections.defaultdict(float)
    starts: list[int] = []

    def timed(name: str, fn):
        def wrapper(self, *a, **k):
            if name == "generate" and k.get("state") is not None:
                starts.append(k["state"].length)
            t = time.perf_counter()
            out = fn(self, *a, **k)
            seconds[name] += time.perf_counter() - t
            return out

        return wrapper

    for name in ("prefill", "think", "generate"):
        setattr(LatentModel, name, timed(name, getattr(LatentModel, name)))
    print(f"model {args.model}, graph {args.graph}, {len(questions)} problems, prompts {args.prompts}\n")
    print("| method | total s | prompt reads s | thoughts s | decoding s | cached positions at decode |")
    print("|---|---|---|---|---|---|")
    for method in args.methods.split(","):
        cfg = RunConfig(
            method=method,
            latent_steps=args.latent_steps,
            batch_size=args.batch_size,
            prompts=args.prompts,
            progress=False,
        )
        agents.run(args.graph, model, questions[: args.batch_size], config=cfg)  # warm-up
        seconds.clear()
        starts.clear()
        t = time.perf_counter()
        agents.run(args.graph, model, questions, config=cfg)
        total = time.perf_counter() - t
        print(
            f"| {method} | {total:.2f} | {seconds['prefill']:.2f} | {seconds['think']:.2f} | "
            f"{seconds['generate']:.2f} | {min(starts, default=0)}-{max(starts, default=0)} |"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/latent_mas_breakdown.py",
        __doc__,
        partial(add_config_arguments, cls=BreakdownBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
