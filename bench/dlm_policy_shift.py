"""How far GRPO moved the policy from SFT on a `latentworks dlm` run (finetune.dlm.policy_shift).

`python bench/dlm_policy_shift.py RUN_DIR --seeds 0 1 2 --prompts 240 --out report.json`
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from finetune.dlm.policy_shift import policy_shift


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a `latentworks dlm` run directory with seed_<k>/{sft,grpo} and data/")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--prompts", type=int, default=240, help="execution prompts drawn (seeded) per seed")
    p.add_argument("--out", required=True, help="JSON report path")
    args = p.parse_args(argv)
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.dialogue import to_samples

    run = Path(args.run_dir)
    missing = [
        run / f"seed_{s}" / d
        for s in args.seeds
        for d in ("sft", "grpo")
        if not (run / f"seed_{s}" / d / "config.json").is_file()
    ]
    if missing:
        raise SystemExit(
            f"no model at {', '.join(map(str, missing))}: run `latentworks dlm sft` and `grpo` first"
        )
    rows = list(load_dataset_dir(run / "data", tiers=["good", "medium", "poor"]))
    report = {}
    for seed in args.seeds:
        samples = to_samples(rows, teammate_prob=0.0, seed=seed)
        picked = random.Random(f"policy-shift|{seed}").sample(samples, min(args.prompts, len(samples)))
        env = picked[0]["env"]
        report[f"seed_{seed}"] = policy_shift(
            run / f"seed_{seed}" / "sft", run / f"seed_{seed}" / "grpo", env, picked
        )
        print(seed, json.dumps(report[f"seed_{seed}"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
