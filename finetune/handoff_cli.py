"""`latentworks finetune mas --task handoff`: train the thought channel on the hand-off task, for any HF
causal LM (LoRA + aligner) or a built-in model (every weight), with a before/after table.

The model lands under `--name` in the model cache (`load_model(NAME)` then finds it, its trained
aligner included) or, for built-in models, in `--export-dir`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from latent import LatentModel

EVAL_ROWS = (
    "no_info",
    "oracle",
    "text_mas",
    "latent_only",
    "latent_only_random",
    "latent_only_other",
    "latent_only_const",
)


def evaluate(model: LatentModel, levels: list[str], n: int, k: int, seed: int = 0) -> dict:
    """Hand-off rows per level on `n` held-out test items (`bench/handoff.py`'s rows)."""
    from eval import tasks_handoff as th
    from eval.tasks_handoff_rows import MAX_NEW_TOKENS, run_row

    out = {}
    for level in levels:
        items = th.make_items(level, n, "test", seed)
        out[level] = {r: run_row(model, items, r, k, MAX_NEW_TOKENS, 16).__dict__ for r in EVAL_ROWS}
    return out


def table(before: dict, after: dict) -> str:
    from eval.report import wilson

    lines = ["| level | row | before | after | after 95% CI |", "|---|---|---:|---:|---:|"]
    for level, rows in after.items():
        for name, a in rows.items():
            b = before.get(level, {}).get(name)
            lo, hi = wilson(a["correct"], a["n"])
            bb = f"{b['correct']}/{b['n']}" if b else "-"
            lines.append(
                f"| {level} | {name} | {bb} | {a['correct']}/{a['n']} | {100 * lo:.1f}-{100 * hi:.1f}% |"
            )
    return "\n".join(lines)


def run(cfg, args: argparse.Namespace) -> int:
    """Train on hand-off items from the `finetune mas` settings (`cfg`: MasTrainConfig) and report."""
    import torch

    from finetune.train_handoff import HandoffTrainConfig, save_config, save_model, train
    from latent import load_model
    from latent.catalogue import cache_dir

    torch.set_num_threads(cfg.threads)
    builtin = cfg.base.startswith("builtin:")
    k = cfg.latent_steps
    hcfg = HandoffTrainConfig(
        base=cfg.base,
        out_dir=cfg.out_dir,
        lora=not builtin,
        levels=list(cfg.levels),
        latent_steps=k,
        k_schedule=list(cfg.handoff_k_schedule) or [s for s in (1, 2, 4, 8, 16) if s < k] + [k],
        steps=cfg.max_steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        max_minutes=cfg.max_minutes,
        seed=cfg.seed,
        threads=cfg.threads,
        arith_frac=0.15 if builtin else 0.0,
        anti_weight=cfg.anti_weight,
        note_weight=cfg.note_weight,
        embed_weight=cfg.embed_weight,
        token_thought_frac=cfg.token_thought_frac,
        token_thought_until=cfg.token_thought_until,
        text_until=cfg.text_until,
        aligner_lr=cfg.aligner_lr,
        log_every=cfg.logging_steps,
    )
    dest = cfg.export_path if builtin else cache_dir() / "models" / cfg.name
    t0 = time.perf_counter()
    lm = load_model(cfg.base)
    if cfg.chat_template:
        from latent.tokenizer import chat_template

        lm.tokenizer.chat_template = chat_template(cfg.chat_template)  # saved with the model
    if lm.tokenizer.chat_template is None:
        raise ValueError(
            f"{cfg.base!r} has no chat template, which the hand-off prompts need: pass `--chat-template gemma` "
            "(or chatml, or a Jinja file)."
        )
    before = evaluate(lm, hcfg.levels, cfg.eval_n, k) if cfg.eval_n else {}
    lm, log, wall = train(hcfg, lm, save_to=Path(cfg.out_dir) / "checkpoint")
    if builtin:
        lm.refresh_aligner()
    save_model(lm, dest)
    save_config(hcfg, Path(cfg.out_dir), log, wall)
    after = evaluate(load_model(str(dest)), hcfg.levels, cfg.eval_n, k) if cfg.eval_n else {}
    metrics = {"before": before, "after": after, "train_wall_s": wall, "total_s": time.perf_counter() - t0}
    (Path(cfg.out_dir) / "handoff_metrics.json").write_text(json.dumps(metrics, indent=2))
    if after:
        print(table(before, after))
    print(f"trained {wall / 60:.1f} min ({len(log) and log[-1]['step']} steps logged); model in {dest}")
    return 0
