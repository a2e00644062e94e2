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
from finetune.dlm.dialogue import SCHEMA_VERSION, check_schema
from finetune.dlm.rewards import reward_functions
from finetune.dlm.sft import check_chat_model, last_checkpoint, lora_config
from latent.device import model_dtype, trainer_common_args

__all__ = [
    "ZeroAdvantageCounter",
    "build_grpo_trainer",
    "grpo_dataset",
    "grpo_prompts",
    "grpo_samples",
    "run_grpo",
    "train_grpo",
    "train_return_model",
]

logger = logging.getLogger(__name__)

_STEP_KEYS = (
    "step",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "entropy_coef",
    "grad_norm",
    "learning_rate",
)
_COLUMNS = ("env", "scenario", "agent", "legal", "action", "joint_actions", "state", "obs", "tier")


def grpo_samples(data_dir: str | Path, tiers: list[str], seed: int) -> list[dict[str, Any]]:
    """Every execution-style sample of `tiers` in a run's dataset: the pool `grpo_prompts` draws from."""
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.dialogue import to_samples

    return to_samples(list(load_dataset_dir(data_dir, tiers=tiers)), teammate_prob=0.0, seed=seed)


def grpo_prompts(samples: list[dict[str, Any]], max_prompts: int, seed: int = 0) -> list[dict[str, Any]]:
    """The samples GRPO trains on: a seeded draw of `max_prompts`. Public so that reports can find a run's
    training prompts again (e.g. to measure the policy shift where GRPO trained)."""
    if not samples:
        raise ValueError("no GRPO samples: check `grpo.tiers` against the generated dataset.")
    check_schema(samples[0]["schema_version"], SCHEMA_VERSION)
    return random.Random(seed).sample(samples, min(max_prompts, len(samples)))


def grpo_dataset(samples: list[dict[str, Any]], max_prompts: int, seed: int = 0):
    """A `datasets.Dataset` with a conversational `prompt` and the columns the rewards read."""
    from datasets import Dataset

    picked = grpo_prompts(samples, max_prompts, seed)
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


class ZeroAdvantageCounter:
    """Counts GRPO groups whose completions all got the same reward, and warns about them.

    GRPO's advantage is a completion's reward minus its group's mean, so a group of ties (every completion
    invalid, or every one the same action) contributes no policy gradient; a step where every group ties
    moves the policy only through the KL term, which is zero while the policy still equals the reference.
    Reads TRL's per-step `frac_reward_zero_std` (the trainer logs every step): `on_log` warns as each dead
    step happens, `summary` counts over the trainer's whole log history, which a run resumed from a
    checkpoint restores, so the steps before the resume are counted too."""

    def __init__(self, groups_per_step: int) -> None:
        self.groups_per_step = groups_per_step

    def _zero_groups(self, logs: dict[str, Any]) -> int:
        return round(float(logs["frac_reward_zero_std"]) * self.groups_per_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        """TRL callback: warn when every group of this step tied (the step moves the policy by the KL term only)."""
        if logs and "frac_reward_zero_std" in logs and self._zero_groups(logs) == self.groups_per_step:
            logger.warning(
                "GRPO step %d: all %d groups have tied rewards (zero advantage); this step does not move the "
                "policy beyond the KL term. Raise `grpo.temperature` or `grpo.num_generations`, or check the "
                "rewards (format/legality) on the SFT model's completions",
                state.global_step,
                self.groups_per_step,
            )
        return control

    def summary(self, log_history: list[dict[str, Any]]) -> dict[str, int]:
        """Counts over `log_history` (the trainer's `state.log_history`, or a run's saved `steps` rows)."""
        zeros = [self._zero_groups(h) for h in log_history if h.get("frac_reward_zero_std") is not None]
        counts = dict(
            zero_advantage_groups=sum(zeros),
            groups=len(zeros) * self.groups_per_step,
            zero_advantage_steps=sum(z == self.groups_per_step for z in zeros),
            logged_steps=len(zeros),
        )
        if counts["zero_advantage_groups"]:
            logger.warning(
                "GRPO: %d of %d groups (%d of %d steps entirely) had zero advantage and taught nothing",
                counts["zero_advantage_groups"],
                counts["groups"],
                counts["zero_advantage_steps"],
                counts["logged_steps"],
            )
        return counts


def _entropy_control(cfg: GRPORunConfig) -> dict[str, Any] | None:
    """The entropy bonus a run used, for its report; None when it had none."""
    if not cfg.use_adaptive_entropy and cfg.entropy_coef == 0:
        return None
    if not cfg.use_adaptive_entropy:
        return {"entropy_coef": cfg.entropy_coef}
    return {
        "adaptive": True,
        "entropy_coef_start": cfg.entropy_coef,
        "entropy_target": cfg.entropy_target,
        "entropy_coef_delta": cfg.entropy_coef_delta,
    }


def build_grpo_trainer(
    cfg: GRPORunConfig,
    model_dir: str | Path,
    dataset,
    reward_funcs: list,
    run_dir: str | Path,
    dtype_name: str = "auto",
):
    """The GRPO trainer `train_grpo` runs (checkpoints under `run_dir/grpo_checkpoints`) and the
    `ZeroAdvantageCounter` its callback feeds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    if cfg.batch_size % cfg.num_generations:
        raise ValueError(
            f"grpo.batch_size {cfg.batch_size} must be a multiple of grpo.num_generations {cfg.num_generations}"
        )
    run_dir = Path(run_dir)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    check_chat_model(tok, str(model_dir))
    tok.padding_side = "left"  # TRL's generation needs left padding
    dtype = model_dtype(dtype_name)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype)
    peft_config = lora_config(model, cfg.lora_r, cfg.lora_layers) if cfg.lora else None
    out = run_dir / "grpo_checkpoints"
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        entropy_coef=cfg.entropy_coef,
        use_adaptive_entropy=cfg.use_adaptive_entropy,
        entropy_target=cfg.entropy_target,
        entropy_coef_delta=cfg.entropy_coef_delta,
        loss_type=cfg.loss_type,
        beta=cfg.beta,
        learning_rate=cfg.learning_rate,
        reward_weights=cfg.reward_weights[: len(reward_funcs)],
        use_vllm=cfg.use_vllm,
        **trainer_common_args(dtype, cfg.seed, logging_steps=1, save_steps=50),
    )
    counter = ZeroAdvantageCounter(cfg.batch_size // cfg.num_generations)
    callback = type("ZeroAdvantageCallback", (TrainerCallback,), {"on_log": counter.on_log})()
    trainer_class = GRPOTrainer
    if cfg.score_prompts_once:
        from finetune.dlm.group_trainer import GroupScoringGRPOTrainer

        trainer_class = GroupScoringGRPOTrainer
    trainer = trainer_class(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[callback],
    )
    return trainer, counter


def train_grpo(
    cfg: GRPORunConfig,
    model_dir: str | Path,
    dataset,
    reward_funcs: list,
    run_dir: str | Path,
    dtype_name: str = "auto",
) -> dict[str, Any]:
    """GRPO-train the chat model in `model_dir` on `dataset` (a conversational `prompt` column and whatever
    the rewards read) with `reward_funcs`; save it (LoRA merged) to `run_dir/grpo` and return the metrics,
    with the zero-advantage counts of `ZeroAdvantageCounter`."""
    run_dir = Path(run_dir)
    trainer, counter = build_grpo_trainer(cfg, model_dir, dataset, reward_funcs, run_dir, dtype_name)
    tok = trainer.processing_class
    result = trainer.train(resume_from_checkpoint=last_checkpoint(run_dir / "grpo_checkpoints"))
    final = trainer.model.merge_and_unload() if cfg.lora else trainer.model
    final.save_pretrained(run_dir / "grpo")
    tok.save_pretrained(run_dir / "grpo")
    history = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {
        "train_loss": result.training_loss,
        "prompts": len(dataset),
        "loss_type": cfg.loss_type,
        "beta": cfg.beta,
        "learning_rate": cfg.learning_rate,
        "entropy_control": _entropy_control(cfg),
        "score_prompts_once": cfg.score_prompts_once,
        "max_steps": cfg.max_steps,
        "reward_first": history[0] if history else None,
        "reward_last": history[-1] if history else None,
        # one short row per step, so runs can be compared step by step without the checkpoints
        "steps": [{k: h.get(k) for k in _STEP_KEYS} for h in history],
        **counter.summary(trainer.state.log_history),
        **result.metrics,
    }
    (run_dir / "grpo").mkdir(parents=True, exist_ok=True)
    (run_dir / "grpo" / "dlm_grpo.json").write_text(json.dumps(metrics, indent=2, default=str))
    return metrics


def run_grpo(
    cfg: GRPORunConfig,
    samples: list[dict[str, Any]],
    sft_dir: str | Path,
    run_dir: str | Path,
    return_model: Any = None,
    dtype_name: str = "auto",
) -> dict[str, Any]:
    """GRPO-train the model in `sft_dir` on the offline rewards; save it (LoRA merged) to `run_dir/grpo`."""
    ds = grpo_dataset(samples, cfg.max_prompts, cfg.seed)
    funcs = reward_functions(cfg.return_reward, cfg.agreement_tiers, return_model, cfg.env_horizon)
    metrics = train_grpo(cfg, sft_dir, ds, funcs, run_dir, dtype_name)
    metrics["return_reward"] = cfg.return_reward
    (Path(run_dir) / "grpo" / "dlm_grpo.json").write_text(json.dumps(metrics, indent=2, default=str))
    return metrics
