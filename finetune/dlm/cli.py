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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.config import default_threads
from finetune.dlm.config import DLMConfig
from latent.args import UsageError, add_config_arguments, config_from_args

__all__ = ["STAGES", "add_arguments", "run"]

logger = logging.getLogger(__name__)

STAGES = ("data", "sft", "grpo", "baselines", "eval", "all")
CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass
class StageOptions:
    """Which stage runs and how; not part of the run's `config.json`."""

    stage: str = field(
        metadata={
            "positional": True,
            "choices": STAGES,
            "help": "pipeline stage to run ('all' runs every stage in order)",
        }
    )
    force: bool = field(
        default=False, metadata={"help": "redo the stage(s) even if outputs exist", "switch": True}
    )
    threads: int = field(default_factory=default_threads, metadata={"help": "torch CPU threads"})

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {self.threads}. Pass a positive number")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `latentworks dlm`: the stage, then `DLMConfig`'s flags, `--config` and `--set`."""
    add_config_arguments(parser, StageOptions, files=False)
    add_config_arguments(parser, DLMConfig)


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


def seed_dir(cfg: DLMConfig, seed: int) -> Path:
    """Where one training seed's models live: `run_dir/seed_<k>/{base,sft,grpo,baselines}`."""
    return Path(cfg.run_dir) / f"seed_{seed}"


def require_sft(cfg: DLMConfig) -> None:
    """Refuse to start `grpo` or `eval` (e.g. a re-evaluation) unless every training seed has its SFT model."""
    missing = [seed_dir(cfg, s) / "sft" for s in cfg.train_seeds]
    missing = [p for p in missing if not (p / "dlm_sft.json").is_file()]
    if missing:
        raise FileNotFoundError(
            f"no SFT model under {', '.join(map(str, missing))}: run `latentworks dlm sft --run-dir "
            f"{cfg.run_dir}` with the same train_seeds first"
        )


def _evaluated(cfg: DLMConfig, label: str) -> bool:
    """Whether `eval.methods` (label prefixes; empty = all) selects the method labelled `label`."""
    return not cfg.eval.methods or label.startswith(tuple(cfg.eval.methods))


def eval_needs_sft(cfg: DLMConfig) -> bool:
    """`eval` loads the per-seed SFT models unless `eval.methods` selects only rows that need no training
    run: the prompted pretrained model, the expert and the baselines (e.g. `--set eval.methods=[Prompted]`).
    A scratch base is written by the SFT stage, so its prompted row needs that stage too."""
    return any(_evaluated(cfg, label) for label in ("DLM-SFT", "DLM-GRPO")) or cfg.sft.model == "scratch"


def stage_data(cfg: DLMConfig, force: bool) -> None:
    """Generate the offline dataset into `run_dir/data` (kept unless `force`)."""
    from finetune.dlm.data import generate_dataset

    out = Path(cfg.run_dir) / "data"
    if (out / "card.json").is_file() and not force:
        logger.info("data exists at %s (use --force to regenerate)", out)
        return
    shutil.rmtree(out, ignore_errors=True)
    generate_dataset(cfg.data, out)


def _trained(run: Path, stage: str, force: bool) -> bool:
    """True (skip it) when `run/<stage>/dlm_<stage>.json` exists and `--force` is off; with `--force`,
    the stage's Trainer checkpoints are removed so it starts over instead of resuming."""
    if (run / stage / f"dlm_{stage}.json").is_file() and not force:
        logger.info("%s model exists at %s", stage.upper(), run / stage)
        return True
    if force:
        shutil.rmtree(run / f"{stage}_checkpoints", ignore_errors=True)
    return False


def stage_sft(cfg: DLMConfig, force: bool) -> None:
    """Supervised fine-tuning of the DLM, one run per training seed (finished runs kept unless `force`)."""
    from finetune.dlm.sft import run_sft

    for seed in cfg.train_seeds:
        run = seed_dir(cfg, seed)
        if _trained(run, "sft", force):
            continue
        sft = replace(cfg.sft, seed=seed)
        run_sft(sft, _samples(cfg, sft.tiers, sft.teammate_prob, seed), run)


def stage_grpo(cfg: DLMConfig, force: bool) -> None:
    """GRPO from each SFT run, with the return model it is rewarded by (finished runs kept unless `force`)."""
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.grpo import grpo_samples, run_grpo, train_return_model

    require_sft(cfg)
    for seed in cfg.train_seeds:
        run = seed_dir(cfg, seed)
        if _trained(run, "grpo", force):
            continue
        grpo = replace(cfg.grpo, seed=seed)
        return_model = None
        if grpo.return_reward == "model":  # fit on the logged trajectories of every tier (coverage)
            rows = load_dataset_dir(Path(cfg.run_dir) / "data")
            return_model = {
                env: train_return_model(
                    grpo, env, rows.filter(lambda r, e=env: r["env"] == e), run / f"return_{env}"
                )
                for env in cfg.envs()
            }
        samples = grpo_samples(Path(cfg.run_dir) / "data", grpo.tiers, seed)
        run_grpo(grpo, samples, run / "sft", run, return_model=return_model, dtype_name=cfg.sft.dtype)


BASELINE_LABELS = {
    "bc": "BC (MLP per agent)",
    "cql": "Independent CQL",
    "qmix_cql": "QMIX + CQL",
    "cfcql": "CFCQL (QMIX)",
}


def _baseline_file(cfg: DLMConfig, seed: int, method: str, env: str) -> Path:
    suffix = "" if len(cfg.envs()) == 1 else f"_{env}"  # one baseline per environment (fixed-size inputs)
    return seed_dir(cfg, seed) / "baselines" / f"{method}{suffix}.pt"


def stage_baselines(cfg: DLMConfig, force: bool) -> None:
    """Train the offline baselines (BC, CQL, the mixer CQL) on the dataset (kept unless `force`)."""
    from finetune.dlm.baselines import save_policy, train_bc, train_cql
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.marl_baselines import joint_arrays, train_mixer_cql

    b = cfg.baselines
    all_rows = load_dataset_dir(Path(cfg.run_dir) / "data", tiers=b.tiers)
    for env in cfg.envs():
        rows = list(all_rows.filter(lambda r, e=env: r["env"] == e))
        joint = joint_arrays(env, rows) if {"qmix_cql", "cfcql"} & set(b.methods) else None
        for seed in cfg.train_seeds:
            for method in b.methods:
                path = _baseline_file(cfg, seed, method, env)
                if path.is_file() and not force:
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                if method == "bc":
                    pol = train_bc(env, rows, epochs=b.bc_epochs, hidden=b.hidden, seed=seed)
                elif method == "cql":
                    pol = train_cql(
                        env, rows, b.cql_steps, alpha=b.cql_alpha, gamma=b.gamma, hidden=b.hidden, seed=seed
                    )
                else:
                    pol = train_mixer_cql(
                        env,
                        joint,
                        method=method,
                        steps=b.marl_steps,
                        alpha=b.cql_alpha,
                        gamma=b.gamma,
                        hidden=b.hidden,
                        seed=seed,
                    )
                save_policy(pol, path)


def _base_label(cfg: DLMConfig) -> str:
    if cfg.sft.model == "scratch":
        return "Prompted LM (untrained scratch base)"
    return f"Prompted LLM ({Path(cfg.sft.model.rstrip('/')).name}, no fine-tuning)"


def _lm(path: str | Path, dtype_name: str):
    from latent.device import model_dtype
    from latent.loading import load_model

    return load_model(str(path), dtype=model_dtype(dtype_name), realign="identity")


def _policies(cfg: DLMConfig) -> list[tuple]:
    """(method, decoding, one policy per training run[, environment]) for every method with models on disk.

    LM policies read text and serve every environment; the feature-vector baselines belong to one."""
    from finetune.dlm.baselines import ExpertPolicy, load_policy
    from finetune.dlm.evaluate import LMPolicy

    n_tok = cfg.eval.max_new_tokens
    pols: list[tuple] = [("Scripted expert (reference)", "-", [ExpertPolicy()])]
    seeds = cfg.train_seeds
    base = seed_dir(cfg, seeds[0]) / "base" if cfg.sft.model == "scratch" else cfg.sft.model
    lm = _lm(base, cfg.sft.dtype)
    label = _base_label(cfg)
    cache: dict[str, dict] = {"free": {}, "constrained": {}}
    pols += [
        (label, "free", [LMPolicy(lm, label, False, n_tok, cache=cache)]),
        (label, "legal-constrained", [LMPolicy(lm, label, True, n_tok, cache=cache)]),
    ]
    for label, sub in (("DLM-SFT", "sft"), ("DLM-GRPO", "grpo")):
        if not _evaluated(cfg, label):
            continue
        paths = [seed_dir(cfg, s) / sub for s in seeds]
        missing = [p for p in paths if not (p / "config.json").is_file()]
        if missing:
            logger.warning("skipping %s: no model at %s", label, missing)
            continue
        lms = [_lm(p, cfg.sft.dtype) for p in paths]
        caches = [{"free": {}, "constrained": {}} for _ in lms]
        pols += [
            (label, "free", [LMPolicy(m, label, False, n_tok, cache=c) for m, c in zip(lms, caches)]),
            (
                label,
                "legal-constrained",
                [LMPolicy(m, label, True, n_tok, cache=c) for m, c in zip(lms, caches)],
            ),
        ]
    for method in cfg.baselines.methods:
        for env in cfg.envs():
            files = [_baseline_file(cfg, s, method, env) for s in seeds]
            if all(f.is_file() for f in files):
                pols.append((BASELINE_LABELS[method], "legal-masked", [load_policy(f) for f in files], env))
    return pols


def stage_eval(cfg: DLMConfig, force: bool) -> None:
    """Evaluate every trained policy and baseline on fresh episodes; write the results."""
    from tqdm.auto import tqdm

    from finetune.dlm.evaluate import run_episodes
    from finetune.dlm.report import results_markdown

    run = Path(cfg.run_dir)
    if (run / "results.json").is_file() and not force:
        logger.info("results exist at %s", run / "results.json")
        return
    pols = _policies(cfg)
    from finetune.dlm.config import split_scenario

    scen = [(s, False) for s in cfg.eval.scenarios] + [(s, True) for s in cfg.eval.zero_shot_scenarios]
    results = []
    per_run = cfg.eval.episodes * len(cfg.eval.seeds)
    total = sum(len(p[2]) for p in pols) * len(scen) * per_run  # upper bound (zero-shot skips rows)
    with tqdm(total=total, desc="dlm eval (episodes)") as bar:
        for scenario, zero_shot in scen:
            env_name, name = split_scenario(cfg.data.env, scenario)
            for label, decoding, runs, *only in pols:
                if only and only[0] != env_name:
                    continue
                if not _evaluated(cfg, label):
                    continue
                # zero-shot rows compare the trained policies under the decoding they are compared with;
                # free decoding and the prompted model are measured in-distribution (CPU-bound evaluation)
                if zero_shot and (decoding == "free" or label.startswith("Prompted")):
                    continue
                t0 = time.time()
                per_seed = []
                episodes = cfg.eval.episodes
                if label.startswith("Prompted") and cfg.eval.prompted_episodes:
                    episodes = cfg.eval.prompted_episodes
                if zero_shot and cfg.eval.zero_shot_episodes:
                    episodes = cfg.eval.zero_shot_episodes
                for pol in runs:  # the same start states for every trained run (strata of the bootstrap)
                    stats = run_episodes(
                        env_name,
                        name,
                        pol,
                        episodes,
                        list(cfg.eval.seeds),
                        progress=bar,
                        max_steps=cfg.eval.max_steps or None,
                    )
                    per_seed.append([asdict(st) for st in stats])
                results.append(
                    {
                        "scenario": scenario,
                        "zero_shot": zero_shot,
                        "method": label,
                        "decoding": decoding,
                        "runs": per_seed,
                        "seconds": time.time() - t0,
                    }
                )
                (run / "results.partial.json").write_text(json.dumps(results, indent=2))
    (run / "results.json").write_text(json.dumps(results, indent=2))
    md = results_markdown(results, cfg)
    (run / "results.md").write_text(md)
    logger.info("results:\n%s", md)


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
    opts = config_from_args(StageOptions, args, files=False)
    import torch

    torch.set_num_threads(opts.threads)
    run_dir = Path(cfg.run_dir)
    if opts.stage == "grpo" or (opts.stage == "eval" and eval_needs_sft(cfg)):
        require_sft(cfg)
    from latent.entry import on_interrupt

    on_interrupt(
        f"finished stages are kept in {run_dir}; the same command continues (SFT and GRPO from their "
        "last checkpoint)"
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    timings_file = run_dir / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    stages = list(_RUNNERS) if opts.stage == "all" else [opts.stage]
    for stage in stages:
        t0 = time.time()
        logger.info("dlm stage %s -> %s", stage, run_dir)
        _RUNNERS[stage](cfg, opts.force)
        timings[stage] = round(time.time() - t0, 1)
        timings_file.write_text(json.dumps(timings, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m finetune.dlm.cli ...` == `latentworks dlm ...`."""
    from latent.entry import run_script

    return run_script("latentworks dlm", __doc__.split("\n\n")[0], add_arguments, run, argv, extra="dlm")


if __name__ == "__main__":
    raise SystemExit(main())
