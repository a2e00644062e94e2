"""Stage 2: offline GRPO from the SFT model with `trl.GRPOTrainer` and the rewards of `rewards.py`.

Prompts are execution-style (local observation only), since GRPO's job here is robustness of what the
policy emits at execution time: sampled completions that are unparseable or illegal get penalised
relative to their group. Every reward is computed from the dataset alone (format, legality, agreement
with good-tier actions, a return model fit on the logged trajectories); the simulator is never touched
unless `return_reward=online` is asked for explicitly.

Objective: the paper does not publish its GRPO settings, so the default is the original GRPO objective
(Shao et al. 2024, DeepSeekMath): `loss_type="grpo"` (per-sequence token mean) with a KL penalty
`beta=0.04` to the SFT model. TRL's own defaults (`dapo`, `beta=0`) are an ablation, not the default.

GPU users: `use_vllm=True` switches TRL's sampling to vLLM (colocated, `pip install "trl[vllm]"`; TRL
accepts vllm 0.22-0.31, which pins transformers < 5.18). CPU runs use the transformers generation path.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

from finetune.dlm.config import GRPORunConfig
from finetune.dlm.device import model_dtype, trainer_common_args
from finetune.dlm.dialogue import SCHEMA_VERSION, check_schema
from finetune.dlm.rewards import reward_functions
from finetune.dlm.sft import check_chat_model, last_checkpoint, lora_config

__all__ = ["grpo_dataset", "run_grpo", "train_return_model"]

logger = logging.getLogger(__name__)

_COLUMNS = ("env", "scenario", "agent", "legal", "action", "joint_actions", "state", "obs", "tier")


def grpo_dataset(samples: list[dict[str, Any]], max_prompts: int, seed: int = 0):
    """A `datasets.Dataset` with a conversational `prompt` and the columns the rewards read."""
    from datasets import Dataset

    if not samples:
        raise ValueError("no GRPO samples: check `grpo.tiers` against the generated dataset.")
    check_schema(samples[0]["schema_version"], SCHEMA_VERSION)
    picked = random.Random(seed).sample(samples, min(max_prompts, len(samples)))
    return Dataset.from_list([{"prompt": s["prompt"], **{c: s[c] for c in _COLUMNS}} for s in picked])


def train_return_model(cfg: GRPORunConfig, env_name: str, rows, out_dir: str | Path):
    """Fit the offline return model on every logged trajectory (all tiers: coverage) and save it."""
    from finetune.dlm.return_model import fit_return_model

    model, stats = fit_return_model(env_name, rows, gamma=cfg.return_gamma, seed=cfg.seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "return_model.pt")
    (out / "return_model.json").write_text(json.dumps(stats, indent=2))
    return model


def run_grpo(
    cfg: GRPORunConfig,
    samples: list[dict[str, Any]],
    sft_dir: str | Path,
    run_dir: str | Path,
    return_model: Any = None,
    dtype_name: str = "auto",
) -> dict[str, Any]:
    """GRPO-train the model in `sft_dir`; save it (LoRA merged) to `run_dir/grpo`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    run_dir = Path(run_dir)
    tok = AutoTokenizer.from_pretrained(str(sft_dir))
    check_chat_model(tok, str(sft_dir))
    tok.padding_side = "left"  # TRL's generation needs left padding
    dtype = model_dtype(dtype_name)
    model = AutoModelForCausalLM.from_pretrained(str(sft_dir), dtype=dtype)
    ds = grpo_dataset(samples, cfg.max_prompts, cfg.seed)
    funcs = reward_functions(cfg.return_reward, cfg.agreement_tiers, return_model, cfg.env_horizon)
    peft_config = lora_config(model, cfg.lora_r, cfg.lora_layers) if cfg.lora else None
    out = run_dir / "grpo_checkpoints"
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        loss_type=cfg.loss_type,
        beta=cfg.beta,
        learning_rate=cfg.learning_rate,
        reward_weights=cfg.reward_weights[: len(funcs)],
        use_vllm=cfg.use_vllm,
        **trainer_common_args(dtype, cfg.seed, logging_steps=5, save_steps=50),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        peft_config=peft_config,
    )
    result = trainer.train(resume_from_checkpoint=last_checkpoint(out))
    final = trainer.model.merge_and_unload() if cfg.lora else trainer.model
    final.save_pretrained(run_dir / "grpo")
    tok.save_pretrained(run_dir / "grpo")
    history = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {
        "train_loss": result.training_loss,
        "prompts": len(ds),
        "loss_type": cfg.loss_type,
        "beta": cfg.beta,
        "return_reward": cfg.return_reward,
        "reward_first": history[0] if history else None,
        "reward_last": history[-1] if history else None,
        **result.metrics,
    }
    (run_dir / "grpo" / "dlm_grpo.json").write_text(json.dumps(metrics, indent=2, default=str))
    return metrics
