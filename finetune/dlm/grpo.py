"""Stage 2: GRPO from the SFT model with `trl.GRPOTrainer` and the lightweight rewards of `rewards.py`.

Prompts are execution-style (local observation only), since GRPO's job here is robustness of what the
policy emits at execution time: sampled completions that are unparseable or illegal get penalised
relative to their group, which is how the invalid-action rate of free decoding is pushed down.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import torch

from finetune.dlm.config import GRPORunConfig
from finetune.dlm.dialogue import SCHEMA_VERSION, check_schema
from finetune.dlm.rewards import reward_functions
from finetune.dlm.sft import check_chat_model, last_checkpoint, trainer_device_args

__all__ = ["grpo_dataset", "run_grpo"]

logger = logging.getLogger(__name__)

_COLUMNS = ("env", "scenario", "agent", "legal", "action", "joint_actions", "state")


def grpo_dataset(samples: list[dict[str, Any]], max_prompts: int, seed: int = 0):
    """A `datasets.Dataset` with a conversational `prompt` and the columns the rewards read."""
    from datasets import Dataset

    if not samples:
        raise ValueError("no GRPO samples: check `grpo.tiers` against the generated dataset.")
    check_schema(samples[0]["schema_version"], SCHEMA_VERSION)
    picked = random.Random(seed).sample(samples, min(max_prompts, len(samples)))
    return Dataset.from_list([{"prompt": s["prompt"], **{c: s[c] for c in _COLUMNS}} for s in picked])


def run_grpo(
    cfg: GRPORunConfig, samples: list[dict[str, Any]], sft_dir: str | Path, run_dir: str | Path
) -> dict[str, Any]:
    """GRPO-train the model in `sft_dir`; save it to `run_dir/grpo`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    run_dir = Path(run_dir)
    tok = AutoTokenizer.from_pretrained(str(sft_dir))
    check_chat_model(tok, str(sft_dir))
    tok.padding_side = "left"  # TRL's generation needs left padding
    model = AutoModelForCausalLM.from_pretrained(str(sft_dir), dtype=torch.float32)
    ds = grpo_dataset(samples, cfg.max_prompts, cfg.seed)
    funcs = reward_functions(cfg.env_horizon)
    out = run_dir / "grpo_checkpoints"
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        beta=cfg.beta,
        learning_rate=cfg.learning_rate,
        reward_weights=cfg.reward_weights[: len(funcs)],
        logging_steps=5,
        save_strategy="steps",
        save_steps=50,
        save_total_limit=1,
        report_to=[],
        seed=cfg.seed,
        dataloader_num_workers=0,
        **trainer_device_args(),
    )
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok)
    result = trainer.train(resume_from_checkpoint=last_checkpoint(out))
    trainer.model.save_pretrained(run_dir / "grpo")
    tok.save_pretrained(run_dir / "grpo")
    history = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {
        "train_loss": result.training_loss,
        "prompts": len(ds),
        "reward_first": history[0] if history else None,
        "reward_last": history[-1] if history else None,
        **result.metrics,
    }
    (run_dir / "grpo" / "dlm_grpo.json").write_text(json.dumps(metrics, indent=2, default=str))
    return metrics
