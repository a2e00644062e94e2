"""Time E1's scenario phase both ways on the same prompts: three separate passes (capture, elicited
P(eval), generation) vs `read_scenarios` (shared prefix once), and check they agree.

`python -m probes.bench_scenarios --model smollm2-135m-instruct --n 32` prints one table row.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class BenchScenariosConfig:
    """Flags of the scenario-phase benchmark."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "model name or path"})
    n: int = field(default=32, metadata={"help": "requests (3 prompts each, --cue-sample)"})
    layer: int = field(default=17, metadata={"help": "decoder layer to capture"})
    max_new_tokens: int = field(default=24, metadata={"help": "reply length"})
    batch_size: int = field(default=32, metadata={"help": "prompts per forward"})

    def __post_init__(self) -> None:
        if self.n < 4:
            raise ValueError(f"--n {self.n} must be >= 4 (the scenario generator's minimum)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latent.args import add_config_arguments

    add_config_arguments(parser, BenchScenariosConfig, files=False)


def main(argv: list[str] | None = None) -> int:
    from latent.args import run_script

    return run_script("python -m probes.bench_scenarios", __doc__.split("\n\n")[0], add_arguments, run, argv)


def run(ns: argparse.Namespace) -> int:
    """Run both paths back to back, print timings and the largest disagreements."""
    from latent.args import config_from_args

    args = config_from_args(BenchScenariosConfig, ns, files=False)
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
