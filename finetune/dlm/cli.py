"""`latentworks dlm data|sft|grpo|baselines|eval|all`: the DLM pipeline as resumable stages.

Each stage writes under `run_dir` and is skipped when its output exists (use `--force` to redo it);
SFT and GRPO also resume from their last Trainer checkpoint after an interruption. Presets live in
`finetune/dlm/configs/*.yaml`; `--set section.key=value` overrides single fields.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from agents.config import default_threads
from finetune.dlm.config import DLMConfig
from latentworks.args import UsageError, add_config_arguments, config_from_args

__all__ = ["STAGES", "add_arguments", "run"]

logger = logging.getLogger(__name__)

STAGES = ("data", "sft", "grpo", "baselines", "eval", "all")
CONFIG_DIR = Path(__file__).parent / "configs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `latentworks dlm`: the stage, then `DLMConfig`'s flags, `--config` and `--set`."""
    parser.add_argument(
        "stage", choices=STAGES, help="pipeline stage to run ('all' runs every stage in order)"
    )
    add_config_arguments(parser, DLMConfig)
    parser.add_argument("--force", action="store_true", help="redo the stage(s) even if outputs exist")
    parser.add_argument(
        "--threads", type=int, default=default_threads(), help="torch CPU threads (default: %(default)s)"
    )


def _config(args: argparse.Namespace) -> DLMConfig:
    """`--config` may name a preset in finetune/dlm/configs/ (e.g. lbf_cpu_small)."""
    if args.config and not Path(args.config).is_file() and (CONFIG_DIR / f"{args.config}.yaml").is_file():
        args.config = str(CONFIG_DIR / f"{args.config}.yaml")
    if args.config and not Path(args.config).is_file():
        presets = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
        raise UsageError(f"no config file or preset {args.config!r}; presets: {presets}. Check the name")
    return config_from_args(DLMConfig, args)


def _samples(cfg: DLMConfig, tiers: list[str], teammate_prob: float, seed: int) -> list[dict[str, Any]]:
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.dialogue import to_samples

    rows = load_dataset_dir(Path(cfg.run_dir) / "data", tiers=tiers)
    return to_samples(list(rows), teammate_prob=teammate_prob, seed=seed)


def stage_data(cfg: DLMConfig, force: bool) -> None:
    from finetune.dlm.data import generate_dataset

    out = Path(cfg.run_dir) / "data"
    if (out / "card.json").is_file() and not force:
        logger.info("data exists at %s (use --force to regenerate)", out)
        return
    shutil.rmtree(out, ignore_errors=True)
    generate_dataset(cfg.data, out)


def stage_sft(cfg: DLMConfig, force: bool) -> None:
    from finetune.dlm.sft import run_sft

    run = Path(cfg.run_dir)
    if (run / "sft" / "dlm_sft.json").is_file() and not force:
        logger.info("SFT model exists at %s", run / "sft")
        return
    if force:
        shutil.rmtree(run / "sft_checkpoints", ignore_errors=True)
    run_sft(cfg.sft, _samples(cfg, cfg.sft.tiers, cfg.sft.teammate_prob, cfg.sft.seed), run)


def stage_grpo(cfg: DLMConfig, force: bool) -> None:
    from finetune.dlm.grpo import run_grpo

    run = Path(cfg.run_dir)
    if not (run / "sft" / "dlm_sft.json").is_file():
        raise FileNotFoundError(f"no SFT model under {run / 'sft'}: run `latentworks dlm sft` first.")
    if (run / "grpo" / "dlm_grpo.json").is_file() and not force:
        logger.info("GRPO model exists at %s", run / "grpo")
        return
    if force:
        shutil.rmtree(run / "grpo_checkpoints", ignore_errors=True)
    run_grpo(cfg.grpo, _samples(cfg, cfg.grpo.tiers, 0.0, cfg.grpo.seed), run / "sft", run)


def stage_baselines(cfg: DLMConfig, force: bool) -> None:
    from finetune.dlm.baselines import save_policy, train_bc, train_cql
    from finetune.dlm.data import load_dataset_dir

    out = Path(cfg.run_dir) / "baselines"
    if (out / "cql.pt").is_file() and not force:
        logger.info("baselines exist at %s", out)
        return
    out.mkdir(parents=True, exist_ok=True)
    b = cfg.baselines
    rows = list(load_dataset_dir(Path(cfg.run_dir) / "data", tiers=b.tiers))
    save_policy(train_bc(cfg.data.env, rows, epochs=b.bc_epochs, hidden=b.hidden, seed=b.seed), out / "bc.pt")
    cql = train_cql(
        cfg.data.env, rows, steps=b.cql_steps, alpha=b.cql_alpha, gamma=b.gamma, hidden=b.hidden, seed=b.seed
    )
    save_policy(cql, out / "cql.pt")


def _policies(cfg: DLMConfig) -> list[tuple[str, str, Any]]:
    from finetune.dlm.baselines import ExpertPolicy, load_policy
    from finetune.dlm.evaluate import LMPolicy
    from latent.loading import load_model

    run, n_tok = Path(cfg.run_dir), cfg.eval.max_new_tokens
    pols: list[tuple[str, str, Any]] = [("Scripted expert (reference)", "-", ExpertPolicy())]
    for label, sub in (
        ("Prompted LM (base, no fine-tuning)", "base"),
        ("DLM-SFT", "sft"),
        ("DLM-GRPO", "grpo"),
    ):
        path = run / sub if sub != "base" or cfg.sft.model == "scratch" else cfg.sft.model
        if sub != "base" and not (Path(path) / "config.json").is_file():
            logger.warning("skipping %s: no model at %s", label, path)
            continue
        lm = load_model(str(path), device="cpu")
        pols += [
            (label, "free", LMPolicy(lm, label, False, n_tok)),
            (label, "legal-constrained", LMPolicy(lm, label, True, n_tok)),
        ]
    for label, f in (("BC (MLP per agent)", "bc.pt"), ("Independent CQL", "cql.pt")):
        if (run / "baselines" / f).is_file():
            pols.append((label, "legal-masked", load_policy(run / "baselines" / f)))
    return pols


def _fmt(res: dict[str, Any], key: str, digits: int = 3) -> str:
    return f"{res[key]:.{digits}f} +- {res[key + '_ci95']:.{digits}f}"


def results_markdown(results: list[dict[str, Any]], cfg: DLMConfig) -> str:
    """The results table: mean +- 95% CI half-width over evaluation seeds."""
    lines = [
        f"Environment `{cfg.data.env}`; {cfg.eval.episodes} episodes x {len(cfg.eval.seeds)} seeds per row; "
        "mean +- 95% t-interval half-width over seeds.",
        "",
        "| scenario | method | decoding | team return | win rate | invalid-action rate | fallbacks / decisions |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["metrics"]
        lines.append(
            f"| {r['scenario']}{' (zero-shot)' if r['zero_shot'] else ''} | {r['method']} | {r['decoding']} | "
            f"{_fmt(m, 'mean_return')} | {_fmt(m, 'win_rate', 2)} | {_fmt(m, 'invalid_rate', 4)} | "
            f"{m['fallbacks']} / {m['decisions']} |"
        )
    return "\n".join(lines) + "\n"


def stage_eval(cfg: DLMConfig, force: bool) -> None:
    from tqdm.auto import tqdm

    from finetune.dlm.evaluate import evaluate

    run = Path(cfg.run_dir)
    if (run / "results.json").is_file() and not force:
        logger.info("results exist at %s", run / "results.json")
        return
    pols = _policies(cfg)
    scen = [(s, False) for s in cfg.eval.scenarios] + [(s, True) for s in cfg.eval.zero_shot_scenarios]
    results = []
    total = len(pols) * len(scen) * cfg.eval.episodes * len(cfg.eval.seeds)  # upper bound (zero-shot skips)
    with tqdm(total=total, desc="dlm eval (episodes)") as bar:
        for scenario, zero_shot in scen:
            for label, decoding, pol in pols:
                # zero-shot rows compare the trained policies; the untrained LM and free decoding are
                # already measured in-distribution and would only double the (CPU-bound) evaluation time
                if zero_shot and (decoding == "free" or label.startswith("Prompted")):
                    continue
                t0 = time.time()
                m = evaluate(cfg.data.env, scenario, pol, cfg.eval.episodes, cfg.eval.seeds, progress=bar)
                results.append(
                    {
                        "scenario": scenario,
                        "zero_shot": zero_shot,
                        "method": label,
                        "decoding": decoding,
                        "metrics": m,
                        "seconds": time.time() - t0,
                    }
                )
    (run / "results.json").write_text(json.dumps(results, indent=2))
    (run / "results.md").write_text(results_markdown(results, cfg))
    logger.info("results table:\n%s", results_markdown(results, cfg))


_RUNNERS = {
    "data": stage_data,
    "sft": stage_sft,
    "grpo": stage_grpo,
    "baselines": stage_baselines,
    "eval": stage_eval,
}


def run(args: argparse.Namespace) -> int:
    """Run one stage (or `all`), recording wall times in `run_dir/timings.json`."""
    cfg = _config(args)
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}. Pass a positive number")
    import torch

    torch.set_num_threads(args.threads)
    run_dir = Path(cfg.run_dir)
    if args.stage in ("grpo", "eval") and not (run_dir / "sft" / "dlm_sft.json").is_file():
        raise FileNotFoundError(
            f"no SFT model under {run_dir / 'sft'}: run `latentworks dlm sft --run-dir {run_dir}` first"
        )
    from latentworks.cli import on_interrupt

    on_interrupt(
        f"finished stages are kept in {run_dir}; the same command continues (SFT and GRPO from their "
        "last checkpoint)"
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    timings_file = run_dir / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    stages = list(_RUNNERS) if args.stage == "all" else [args.stage]
    for stage in stages:
        t0 = time.time()
        logger.info("dlm stage %s -> %s", stage, run_dir)
        _RUNNERS[stage](cfg, args.force)
        timings[stage] = round(time.time() - t0, 1)
        timings_file.write_text(json.dumps(timings, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m finetune.dlm.cli ...` == `latentworks dlm ...`."""
    from latentworks.cli import main as latentworks

    return latentworks(["dlm", *(argv or [])])


if __name__ == "__main__":
    raise SystemExit(main())
