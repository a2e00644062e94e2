"""GRPO objective ablation table from finished run directories (same data and SFT models, GRPO redone).

A committed report directory (`finetune/dlm/results/<run>/`, with its `config.json` and `results.json`) reads
the same as the run directory it came from.

    python -m finetune.dlm.ablation RUN_DIR [RUN_DIR ...] --scenario 6x6-2p-2f

The first directory is the reference: P(variant > reference) is computed on the DLM-GRPO team return under
legal-constrained decoding; free decoding gives the invalid-action rate.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from finetune.dlm.report import row_arrays
from finetune.dlm.stats import iqm_interval, probability_of_improvement, verdict, wilson_interval

__all__ = ["ablation_markdown", "main"]


def _rows(run_dir: Path, scenario: str) -> dict[str, dict]:
    results = json.loads((run_dir / "results.json").read_text())
    return {r["decoding"]: r for r in results if r["method"] == "DLM-GRPO" and r["scenario"] == scenario}


def _entropy_bonus(cfg: dict) -> str:
    """A run's entropy bonus as the table shows it; configs written before the option read as none."""
    if cfg.get("use_adaptive_entropy"):
        return f"adaptive, target {cfg['entropy_target']:g}, step {cfg['entropy_coef_delta']:g}"
    return f"{cfg['entropy_coef']:g}" if cfg.get("entropy_coef") else "none"


def ablation_markdown(run_dirs: list[str | Path], scenario: str, reps: int = 2000) -> str:
    """Markdown table of the ablation runs in `run_dirs` on `scenario`, bootstrap intervals of `reps`."""
    dirs = [Path(d) for d in run_dirs]
    ref = row_arrays(_rows(dirs[0], scenario)["legal-constrained"])[0]
    lines = [
        "| run | loss_type | beta | learning rate | sampling temperature | entropy bonus | steps | prompts per step | "
        "completions per prompt | prompt pool | "
        "return reward | "
        "reward weights (format / legality / agreement / return) | "
        "free-decoding invalid rate [95% CI] | return IQM, constrained [95% CI] | win rate [95% CI] | "
        "P(run > first run) [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in dirs:
        cfg = json.loads((d / "config.json").read_text())["grpo"]
        rows = _rows(d, scenario)
        _, _, inv, dec = row_arrays(rows["free"])
        ret, win, _, _ = row_arrays(rows["legal-constrained"])
        iqm, w, i = (
            iqm_interval(ret, reps),
            wilson_interval(int(win.sum()), win.size),
            wilson_interval(inv, dec),
        )
        poi = probability_of_improvement(ret, ref, reps) if d != dirs[0] else None
        poi_txt = "-" if poi is None else f"{poi[0]:.2f} [{poi[1]:.2f}, {poi[2]:.2f}] ({verdict(poi)})"
        lines.append(
            f"| `{d.name}` | {cfg['loss_type']} | {cfg['beta']} | {cfg['learning_rate']:g} | {cfg['temperature']:g} | "
            f"{_entropy_bonus(cfg)} | {cfg['max_steps']} | "
            f"{cfg['batch_size'] // cfg['num_generations']} | {cfg['num_generations']} | {cfg['max_prompts']} | "
            f"{cfg['return_reward']} | "
            f"{' / '.join(f'{w:g}' for w in cfg['reward_weights'])} | "
            f"{i[0]:.3f} [{i[1]:.3f}, {i[2]:.3f}] | {iqm[0]:.3f} [{iqm[1]:.3f}, {iqm[2]:.3f}] | "
            f"{w[0]:.2f} [{w[1]:.2f}, {w[2]:.2f}] | {poi_txt} |"
        )
    return "\n".join(lines) + "\n"


@dataclass
class AblationOptions:
    """The run directories to compare (the first is the reference) and the scenario they share."""

    run_dirs: list[str] = field(metadata={"positional": True, "help": "finished `latentworks dlm` run dirs"})
    scenario: str = field(metadata={"help": "scenario of the table, e.g. 6x6-2p-2f"})
    reps: int = field(default=2000, metadata={"help": "bootstrap resamples"})


def main(argv: list[str] | None = None) -> int:
    """`python -m finetune.dlm.ablation`: print the ablation table of the given run directories."""
    from latent.args import add_config_arguments, config_from_args, run_script

    def run(args: argparse.Namespace) -> int:
        opts = config_from_args(AblationOptions, args, files=False)
        print(ablation_markdown(opts.run_dirs, opts.scenario, opts.reps))
        return 0

    return run_script(
        "python -m finetune.dlm.ablation",
        __doc__,
        lambda p: add_config_arguments(p, AblationOptions, files=False),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
