"""Can the SFT model learn its rewards' per-state choices at all? Supervise it on them and measure.

GRPO on a `latentworks dlm` run can fail to raise how often the policy picks the legal action its rewards
score highest. This separates the two reasons: the model cannot tell the states apart the way the rewards
do, or GRPO does not find the choice. Starting from a seed's SFT model, it fine-tunes (same LoRA shape as
the run's GRPO) on that seed's GRPO training prompts, each labelled with its reward-best action, then
reports the policy shift (finetune.dlm.policy_shift) on those prompts and on the held-aside sample the
policy-shift bench draws. High reward-best rates on the training prompts mean the model can represent the
choice and GRPO's updates are what falls short.

`python bench/studies/dlm_reward_best_sft.py RUN_DIR --seed 2 --epochs 4 --out report.json`
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class RewardBestSFTBench:
    """Flags of the reward-best supervision check."""

    run_dir: str = field(
        metadata={
            "positional": True,
            "help": "a `latentworks dlm` run with seed_<k>/{sft,grpo}, data/, config.json",
        }
    )
    out: str = field(
        metadata={"help": "JSON report path; the fine-tuned model goes to this path without its suffix"}
    )
    seed: int = field(default=0, metadata={"help": "training seed whose SFT model and GRPO prompts to use"})
    epochs: float = field(default=4.0, metadata={"help": "passes over the GRPO training prompts"})
    learning_rate: float = field(
        default=1e-3, metadata={"help": "LoRA learning rate (the run's SFT default)"}
    )
    prompts: int = field(
        default=240, metadata={"help": "size of the policy-shift sample (as dlm_policy_shift.py)"}
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(RewardBestSFTBench, ns)
    from finetune.dlm.config import SFTRunConfig
    from finetune.dlm.policy_shift import (
        policy_shift,
        reward_best_labels,
        run_grpo_prompts,
        run_rewards,
        shift_prompts,
    )
    from finetune.dlm.sft import run_sft

    root = Path(args.run_dir)
    seed_dir = root / f"seed_{args.seed}"
    if not (seed_dir / "sft" / "config.json").is_file() or not (root / "config.json").is_file():
        raise UsageError(
            f"no SFT model or config.json under {root}: run `latentworks dlm sft` and `grpo` first"
        )
    cfg = json.loads((root / "config.json").read_text())
    grpo_cfg = cfg["grpo"]
    train = run_grpo_prompts(root, args.seed)
    env = train[0]["env"]
    rewards, weights = run_rewards(root, args.seed, env)
    if rewards is None:
        raise UsageError("this run used the online return reward; the check needs offline rewards")
    labelled = reward_best_labels(train, rewards, weights)
    out_dir = Path(args.out).with_suffix("")
    sft_cfg = SFTRunConfig(
        model=str(seed_dir / "sft"),
        dtype="float32",
        tiers=list(grpo_cfg["tiers"]),
        teammate_prob=0.0,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        warmup_steps=1,
        batch_size=4,
        max_length=256,
        lora=True,
        lora_r=grpo_cfg["lora_r"],
        lora_layers=grpo_cfg["lora_layers"],
        seed=args.seed,
    )
    metrics = run_sft(sft_cfg, labelled, out_dir)
    sample = shift_prompts(root / "data", args.prompts, [args.seed])[args.seed]
    report = {
        "seed": args.seed,
        "epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "sft_metrics": metrics,
    }
    for name, prompts in (("grpo_prompts", train), ("sample", sample)):
        report[name] = policy_shift(
            seed_dir / "sft", out_dir / "sft", env, prompts, rewards=rewards, weights=weights
        )
        print(name, json.dumps({k: v for k, v in report[name].items() if k != "reward_by_action"}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/dlm_reward_best_sft.py",
        __doc__,
        partial(add_config_arguments, cls=RewardBestSFTBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
