"""Time E1's scenario phase both ways on the same prompts: three separate passes (capture, elicited
P(eval), generation) vs `read_scenarios` (shared prefix once), and check they agree.

`python -m probes.bench_scenarios --model smollm2-135m-instruct --n 32` prints one table row.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    """Parse flags, run both paths back to back, print timings and the largest disagreements."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct", help="model name or path")
    p.add_argument("--n", type=int, default=32, help="requests (3 prompts each, --cue-sample)")
    p.add_argument("--layer", type=int, default=17, help="decoder layer to capture")
    p.add_argument("--max-new-tokens", type=int, default=24, help="reply length")
    p.add_argument("--batch-size", type=int, default=32, help="prompts per forward")
    args = p.parse_args(argv)
    if args.n < 4:
        p.error(f"--n {args.n} must be >= 4 (the scenario generator's minimum)")
    import torch

    from latent import load_model
    from probes.activations import capture_items
    from probes.config import ProbeConfig
    from probes.e1 import scenario_items
    from probes.elicit import elicit_items, elicited_p_eval
    from probes.scenario_pass import read_scenarios
    from probes.steering import generate_texts

    torch.set_num_threads(1)
    m = load_model(args.model)
    items = scenario_items(ProbeConfig(n=args.n, cue_sample=True))
    t0 = time.perf_counter()
    acts = capture_items(m, items, [args.layer], "last", args.batch_size)
    p_eval, _ = elicited_p_eval(m, elicit_items(items), args.batch_size)
    texts = generate_texts(m, items, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    t_sep = time.perf_counter() - t0
    t0 = time.perf_counter()
    one = read_scenarios(m, items, [args.layer], args.max_new_tokens, args.batch_size)
    t_one = time.perf_counter() - t0
    d_act = float(np.abs(acts.acts[args.layer] - one.acts.acts[args.layer]).max())
    d_p = float(np.abs(p_eval - one.p_eval).max())
    same = sum(a == b for a, b in zip(texts, one.texts))
    print(
        "| prompts | separate passes s | one pass s | speed-up | max abs d activation | max abs d P(eval) | same replies |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {len(items)} | {t_sep:.1f} | {t_one:.1f} | {t_sep / t_one:.2f}x | {d_act:.1e} | {d_p:.1e} | "
        f"{same}/{len(texts)} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
