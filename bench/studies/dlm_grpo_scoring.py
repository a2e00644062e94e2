"""GRPO step time with each distinct prompt scored once (`grpo.score_prompts_once`) against TRL's scoring.

`python bench/studies/dlm_grpo_scoring.py RUN_DIR --seed 0 --steps 4 --reps 2 --out report.json`

Both trainers run the GRPO settings of RUN_DIR's `config.json` (a `latentworks dlm grpo` run) from the
seed's SFT model, with the seed's prompts and rewards, `--steps` optimizer steps per trial, `--reps` trials
each, the order alternating. Step 1 of each trial is left out of the timings (warm-up). Step 1 samples the
same completions under both (generation does not read the scoring), so its loss and gradient norm must
agree up to float rounding; the table prints them.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class GRPOScoringBench:
    """Flags of the GRPO scoring benchmark."""

    run_dir: str = field(
        metadata={
            "positional": True,
            "help": "a `latentworks dlm grpo` run with config.json, data/, seed_<k>/sft and its return model",
        }
    )
    out: str = field(metadata={"help": "JSON report path; the trials' checkpoints go beside it"})
    seed: int = field(
        default=0, metadata={"help": "training seed whose SFT model, prompts and rewards to use"}
    )
    steps: int = field(default=4, metadata={"help": "optimizer steps per trial (the first is warm-up)"})
    reps: int = field(default=2, metadata={"help": "trials per scoring"})


def _trial(cfg, sft, dataset, rewards, out: Path) -> list[dict]:
    from finetune.dlm.grpo import build_grpo_trainer

    trainer, _ = build_grpo_trainer(cfg, sft, dataset, rewards, out)
    trainer.train()
    return [h for h in trainer.state.log_history if "step_time" in h]


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(GRPOScoringBench, ns)
    if args.steps < 2 or args.reps < 1:
        raise UsageError(
            f"--steps {args.steps} --reps {args.reps}: use --steps >= 2 (one is warm-up), --reps >= 1"
        )
    from finetune.dlm.config import GRPORunConfig
    from finetune.dlm.grpo import grpo_dataset, grpo_samples
    from finetune.dlm.policy_shift import run_rewards

    root = Path(args.run_dir)
    sft = root / f"seed_{args.seed}" / "sft"
    if not (root / "config.json").is_file() or not (sft / "config.json").is_file():
        raise UsageError(
            f"no config.json or SFT model under {root}: run `latentworks dlm sft` and `grpo` first"
        )
    settings = json.loads((root / "config.json").read_text())["grpo"]
    known = GRPORunConfig.__dataclass_fields__
    cfg = GRPORunConfig(**{k: v for k, v in settings.items() if k in known})
    cfg = replace(cfg, seed=args.seed, max_steps=args.steps)
    samples = grpo_samples(root / "data", cfg.tiers, args.seed)
    dataset = grpo_dataset(samples, cfg.max_prompts, args.seed)
    rewards, _ = run_rewards(root, args.seed, samples[0]["env"])
    work = Path(args.out).with_suffix("")
    rows: dict[bool, list[list[dict]]] = {False: [], True: []}
    for rep in range(args.reps):
        for once in (False, True) if rep % 2 == 0 else (True, False):
            logs = _trial(
                replace(cfg, score_prompts_once=once), sft, dataset, rewards, work / f"rep{rep}_{once}"
            )
            rows[once].append(logs)
            print(
                f"rep {rep} score_prompts_once={once}: " + ", ".join(f"{h['step_time']:.1f}s" for h in logs)
            )
    times = {once: [h["step_time"] for logs in rows[once] for h in logs[1:]] for once in rows}
    ratios = [
        statistics.median(h["step_time"] for h in a[1:]) / statistics.median(h["step_time"] for h in b[1:])
        for a, b in zip(rows[False], rows[True])
    ]
    first = {once: rows[once][0][0] for once in rows}
    report = {
        "run_dir": str(root),
        "seed": args.seed,
        "steps": args.steps,
        "reps": args.reps,
        "batch_size": cfg.batch_size,
        "num_generations": cfg.num_generations,
        "lora_layers": cfg.lora_layers,
        "step_time_s": {str(k): v for k, v in times.items()},
        "speedup_per_rep": ratios,
        "step1": {str(k): {m: first[k].get(m) for m in ("loss", "grad_norm", "kl", "reward")} for k in first},
    }
    print(
        f"\nGRPO steps on {sft} ({cfg.batch_size // cfg.num_generations} prompts x {cfg.num_generations} completions)"
    )
    print("| scoring | step time, s: median [min, max] | step 1 loss | step 1 grad norm |")
    print("|---|---|---|---|")
    for once, name in ((False, "TRL, per row"), (True, "each prompt once")):
        print(
            f"| {name} | {_spread(times[once])} | {first[once]['loss']:.6g} | {first[once]['grad_norm']:.6g} |"
        )
    print(f"\nspeed-up (TRL median / once median, per rep): {_spread(ratios)}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/dlm_grpo_scoring.py",
        __doc__,
        partial(add_config_arguments, cls=GRPOScoringBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
