"""Orchestrate LatentMAS from Python: compare methods on a few built-in problems and inspect latents.

python examples/latentmas_quickstart.py [--model builtin:arith-mini] [--save-memory FILE.safetensors]

Writes nothing unless --save-memory names a file.
"""

from __future__ import annotations

import argparse

import agents
from eval.tasks.arith_data import make_problems
from latent import load_model
from latent.memory import WorkingMemory


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="builtin:arith-mini")
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--save-memory", default=None, help="write the planner's working memory to this file")
    args = p.parse_args()
    model = load_model(args.model)
    problems = make_problems(args.n, seed=7, split="heldout")
    questions = [pr.question for pr in problems]
    for method in agents.METHODS:
        results = agents.run("sequential", model, questions, method=method, latent_steps=8, max_new_tokens=96)
        right = sum(str(pr.answer) in r.text for pr, r in zip(problems, results))
        tokens = sum(r.output_tokens for r in results)
        print(f"{method:>10}: {right}/{len(problems)} contain the answer, {tokens} output tokens")
    # What did the planner "say" in latent space? The logit lens of its first thoughts:
    res = agents.run("sequential", model, questions[:1], latent_steps=8, max_new_tokens=96, inspect_latents=3)
    planner = res[0].agents[0]
    print("planner latent thoughts (top-3 tokens each):")
    for i, top in enumerate(planner.latent_tokens):
        print(f"  thought {i}: " + ", ".join(f"{t!r} {p:.2f}" for t, p in top))
    # The working memory can be built and saved step by step too:
    mem = WorkingMemory(model)
    enc = model.encode([agents.PromptSet.load().messages("planner", questions[0])])
    st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    st, lid = mem.write_latent("planner", st, 8, [pid])
    print(f"memory: {st.length} positions, {st.nbytes / 1024:.1f} KiB of KV")
    if args.save_memory:
        mem.save(args.save_memory)
        print(f"saved the working memory to {args.save_memory}")


if __name__ == "__main__":
    main()
