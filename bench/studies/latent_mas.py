"""single vs text_mas vs latent_mas on the built-in model and task, sequential and hierarchical.

    python bench/studies/latent_mas.py                       # 100 held-out problems, both graphs
    python bench/studies/latent_mas.py --limit 200 --sweep 0,5,20,40
    python bench/studies/latent_mas.py --prompt-sets default,compact   # latent_mas also without re-reading the question
    python bench/studies/latent_mas.py --graphs hierarchical,examples/graphs/hierarchical_latent.yaml
    python bench/studies/latent_mas.py --model smollm2-135m-instruct --task "rg:chain_sum?min_terms=2&max_terms=2&max_digits=1"

Runs through the same resumable harness as `latentworks eval` (results under --out), then prints one
table: accuracy, output tokens and seconds per item per method, and the text_mas / latent_mas ratios
(the paper's headline: >= 4.3x faster and >= 83.7% fewer tokens at equal or better accuracy).
All methods of one graph run in one process, interleaved batch by batch (the runner runs every method on
a batch before the next batch), so a change in machine load hits all methods alike.
"""

from __future__ import annotations

import argparse
import platform
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from agents.config import RunConfig
from agents.graph import Graph
from eval.demo import demo_dtype
from eval.report import summarize, time_ratio_spread
from eval.run_state import load_results
from eval.runner import EvalConfig, evaluate
from latent.args import add_config_arguments, config_from_args, run_script


def _slug(task: str) -> str:
    """A directory-safe name for a task (rg options hold '?', '&' and '=')."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", task).strip("_")


@dataclass
class LatentMasBench:
    """Flags of the method comparison."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "load_model name or path"})
    task: str = field(default="arith", metadata={"help": "any `latentworks eval --list-tasks` name"})
    limit: int = field(default=100, metadata={"help": "problems"})
    graphs: str = field(default="sequential,hierarchical", metadata={"help": "presets or graph files"})
    latent_steps: int | None = field(default=None, metadata={"help": "default: agents.DEFAULT_LATENT_STEPS"})
    sweep: str = field(
        default="", metadata={"help": "extra latent_mas runs at these latent steps, e.g. 0,5,40"}
    )
    prompt_sets: str = field(
        default="default",
        metadata={
            "help": "prompt sets, e.g. default,compact: the first for every method, the others for extra "
            "latent_mas rows (single and text_mas prompts are the same in every set)"
        },
    )
    max_new_tokens: int = field(default=96, metadata={"help": "decode budget per decoding agent"})
    batch_size: int = field(default=25, metadata={"help": "problems per batch"})
    out: str = field(default="runs/bench_latent_mas", metadata={"help": "results folder (resumable)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    dtype: str | None = field(
        default=None, metadata={"help": "float32 | bfloat16 | float16 (default: the loader's, fp32 on CPU)"}
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(LatentMasBench, ns)
    from agents import DEFAULT_LATENT_STEPS

    steps = DEFAULT_LATENT_STEPS if args.latent_steps is None else args.latent_steps
    args.dtype = args.dtype or demo_dtype()
    rows, spreads = [], {}
    sets = [s.strip() for s in args.prompt_sets.split(",") if s.strip()]
    names = {g: Graph.resolve(g).name for g in args.graphs.split(",")}  # a graph file shows its name
    for graph in args.graphs.split(","):
        runs = [("single,text_mas,latent_mas", steps, sets[0])]
        runs += [("latent_mas", steps, ps) for ps in sets[1:]]
        runs += [
            ("latent_mas", int(s), sets[0]) for s in args.sweep.split(",") if s.strip() and int(s) != steps
        ]
        for methods, k, prompts in runs:
            run_dir = (
                f"{args.out}/{_slug(args.task)}-{_slug(graph)}-{methods.replace(',', '_')}-k{k}"
                + ("" if prompts == "default" else f"-{_slug(prompts)}")
                + ("" if args.dtype is None else f"-{args.dtype}")
            )
            cfg = EvalConfig(
                model=args.model,
                task=args.task,
                graph=graph,
                limit=args.limit,
                methods=methods,
                dtype=args.dtype,
                run=RunConfig(
                    latent_steps=k,
                    max_new_tokens=args.max_new_tokens,
                    batch_size=args.batch_size,
                    threads=args.threads,
                    prompts=prompts,
                ),
                out=run_dir,
                resume=(Path(run_dir) / "manifest.json").is_file(),  # a fresh --out starts a new run
            )
            out = evaluate(cfg)
            records = load_results(out)
            if "text_mas" in methods:  # interleaved with latent_mas batch by batch: a side-by-side spread
                spreads[graph] = time_ratio_spread(records)
            for r in summarize(records):
                latent = r["method"] == "latent_mas"
                rows.append({**r, "graph": graph, "k": k if latent else None, "prompts": prompts})
    print(
        f"model {args.model}, task {args.task}, {args.limit} problems, greedy, "
        f"max {args.max_new_tokens} new tokens per decoding agent, dtype {args.dtype or 'default'}, "
        f"{platform.processor() or platform.machine()}"
    )
    print()
    print(
        f"| {'graph':<19} | {'method':<16} | {'prompts':<8} | {'accuracy':>8} | {'95% CI':>13} | "
        f"{'out tokens':>10} | {'s/item':>7} |"
    )
    print("|" + "|".join("-" * w for w in (21, 18, 10, 10, 15, 12, 9)) + "|")
    for r in rows:
        name = r["method"] + (f" (k={r['k']})" if r["k"] is not None else "")
        ci = f"{r['ci_low']:.1%}-{r['ci_high']:.1%}"
        print(
            f"| {names[r['graph']]:<19} | {name:<16} | {r['prompts']:<8} | {r['accuracy']:>8.1%} | {ci:>13} | "
            f"{r['output_tokens']:>10.1f} | {r['seconds_per_item']:>7.3f} |"
        )
    print()
    for graph in args.graphs.split(","):
        base = {r["method"]: r for r in rows if r["graph"] == graph and r["method"] != "latent_mas"}
        for lat in (
            r for r in rows if r["graph"] == graph and r["method"] == "latent_mas" and r["k"] == steps
        ):
            if "text_mas" not in base:
                continue
            t = base["text_mas"]
            spread = spreads.get(graph) if lat["prompts"] == sets[0] else None
            side = (
                f" (per batch, side by side: median {spread['median']:.2f}x, "
                f"{spread['min']:.2f}-{spread['max']:.2f}x over {spread['batches']} batches)"
                if spread
                else " (separate run)"
            )
            print(
                f"{names[graph]} ({lat['prompts']} prompts): text_mas/latent_mas time "
                f"{t['seconds_per_item'] / lat['seconds_per_item']:.2f}x{side}, "
                f"latent_mas {1 - lat['output_tokens'] / t['output_tokens']:.1%} fewer output tokens, "
                f"accuracy {lat['accuracy'] - t['accuracy']:+.1%} points vs text_mas, "
                f"{lat['accuracy'] - base['single']['accuracy']:+.1%} vs single"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/latent_mas.py", __doc__, partial(add_config_arguments, cls=LatentMasBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
