"""How far GRPO moved the policy from SFT on a `latentworks dlm` run (finetune.dlm.policy_shift).

`python bench/studies/dlm_policy_shift.py RUN_DIR --seeds 0 1 2 --prompts 240 --out report.json`

`--prompt-set grpo` measures on each seed's GRPO training prompts instead (the run's own seeded draw),
which shows whether GRPO learned the states it trained on, apart from how that carries to other states.
`--draw 1` measures on a fresh sample sharing no prompt with the standard one, for recipes chosen after
reading the standard sample's numbers.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class PolicyShiftBench:
    """Flags of the policy-shift report."""

    run_dir: str = field(
        metadata={
            "positional": True,
            "help": "a `latentworks dlm` run directory with seed_<k>/{sft,grpo} and data/",
        }
    )
    out: str = field(metadata={"help": "JSON report path"})
    seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "training seeds to compare"})
    prompts: int = field(default=240, metadata={"help": "execution prompts drawn (seeded) per seed"})
    prompt_set: str = field(
        default="sample",
        metadata={
            "help": "sample: --prompts drawn from every tier; grpo: the seed's GRPO training prompts",
            "choices": ["sample", "grpo"],
        },
    )
    draw: int = field(
        default=0,
        metadata={
            "help": "with --prompt-set sample: 0 is the standard draw; k >= 1 a fresh one sharing no prompt"
            " with draws 0..k-1"
        },
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(PolicyShiftBench, ns)
    from finetune.dlm.policy_shift import policy_shift, run_grpo_prompts, run_rewards, shift_prompts

    if args.draw < 0:
        raise UsageError(f"--draw {args.draw}: use 0 (the standard sample) or k >= 1 (a fresh one)")
    if args.draw and args.prompt_set != "sample":
        raise UsageError("--draw picks among --prompt-set sample draws; drop it with --prompt-set grpo")
    root = Path(args.run_dir)
    missing = [
        root / f"seed_{s}" / d
        for s in args.seeds
        for d in ("sft", "grpo")
        if not (root / f"seed_{s}" / d / "config.json").is_file()
    ]
    if missing:
        raise UsageError(
            f"no model at {', '.join(map(str, missing))}: run `latentworks dlm sft` and `grpo` first"
        )
    if args.prompt_set == "sample":
        sample = shift_prompts(root / "data", args.prompts, args.seeds, draw=args.draw)
    report = {}
    for seed in args.seeds:
        # the draw `latentworks dlm grpo` trained this seed on, or the shared policy-shift sample
        picked = run_grpo_prompts(root, seed) if args.prompt_set == "grpo" else sample[seed]
        env = picked[0]["env"]
        rewards, weights = run_rewards(root, seed, env)
        report[f"seed_{seed}"] = policy_shift(
            root / f"seed_{seed}" / "sft", root / f"seed_{seed}" / "grpo", env, picked,
            rewards=rewards, weights=weights,
        ) | {"prompt_set": args.prompt_set, "draw": args.draw}  # fmt: skip
        print(seed, json.dumps(report[f"seed_{seed}"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/dlm_policy_shift.py",
        __doc__,
        partial(add_config_arguments, cls=PolicyShiftBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
