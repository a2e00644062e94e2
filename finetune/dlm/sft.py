"""Stage 1: supervised fine-tuning on dialogue samples with `trl.SFTTrainer` (completion-only loss).

Samples are prompt/completion pairs (prompt = system + optional teammates' turns + this agent's local
observation; completion = the action word), so TRL masks the prompt without template markers.
The base model is any causal LM with a chat template (e.g. SmolLM2-135M-Instruct, trained with a LoRA
adapter that is merged on save), or `scratch`: a small Llama initialised from a
config with a byte-level BPE chat tokenizer trained on the dialogue text (`latent.tokenizer`).
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune.dlm.config import SFTRunConfig
from finetune.dlm.dialogue import SCHEMA_VERSION, check_schema
from latent.device import model_dtype, trainer_common_args, trainer_device_args

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "build_scratch_model",
    "build_sft_trainer",
    "check_chat_model",
    "last_checkpoint",
    "lora_config",
    "prepare_base_model",
    "run_sft",
    "trainer_device_args",
]

logger = logging.getLogger(__name__)


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest `checkpoint-<step>` directory, for resuming an interrupted run."""
    ckpts = sorted(Path(output_dir).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return str(ckpts[-1]) if ckpts else None


def check_chat_model(tokenizer: PreTrainedTokenizerBase, where: str) -> None:
    """DLM prompts are chat conversations: refuse a tokenizer without a chat template up front."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            f"the tokenizer of {where!r} has no chat template, so DLM dialogues cannot be rendered. Use an "
            "instruct/chat model, set `tokenizer.chat_template` and save it, or use `sft.model=scratch`."
        )
    if tokenizer.eos_token_id is None:
        raise ValueError(f"the tokenizer of {where!r} has no `eos_token`; DLM needs an end-of-turn token.")


def build_scratch_model(cfg: SFTRunConfig, corpus: list[str], out_dir: str | Path) -> str:
    """A small random Llama + a chat tokenizer trained on `corpus`, saved to `out_dir`."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from latent.tokenizer import train_chat_tokenizer

    tok = train_chat_tokenizer(corpus, vocab_size=cfg.vocab_size)
    torch.manual_seed(cfg.seed)
    heads = max(1, cfg.hidden_size // 32)
    mcfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.hidden_size * 4,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max(cfg.max_length, 128),
        tie_word_embeddings=True,  # halves the parameters of a tiny model; the embedding is most of them
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    model = AutoModelForCausalLM.from_config(mcfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    n = sum(p.numel() for p in model.parameters())
    logger.info("scratch Llama: %.2fM parameters, vocabulary %d -> %s", n / 1e6, len(tok), out_dir)
    return str(out_dir)


def _chat_text(sample: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in sample["prompt"] + sample["completion"])


def prepare_base_model(cfg: SFTRunConfig, samples: list[dict[str, Any]], run_dir: str | Path) -> str:
    """Resolve the base model to a local directory (building it for `scratch`), checking its chat template."""
    base = Path(run_dir) / "base"
    if cfg.model == "scratch":
        if not (base / "config.json").is_file():
            corpus = [_chat_text(s) for s in random.Random(cfg.seed).sample(samples, min(len(samples), 3000))]
            build_scratch_model(cfg, corpus, base)
        return str(base)
    from latent.loading import resolve_model_path

    path = resolve_model_path(cfg.model)
    from transformers import AutoTokenizer

    check_chat_model(AutoTokenizer.from_pretrained(path), cfg.model)
    return path


def lora_config(model: PreTrainedModel, r: int, top_layers: int = 0):
    """LoRA on every linear layer, or on the top `top_layers` decoder layers only (cheaper backward)."""
    from peft import LoraConfig

    kwargs: dict[str, Any] = {}
    n_layers = int(getattr(model.config, "num_hidden_layers", 0))
    if top_layers:
        if not 0 < top_layers <= n_layers:
            raise ValueError(f"`lora_layers`={top_layers} must be in 1..{n_layers} for this model (0 = all).")
        kwargs = {
            "layers_to_transform": list(range(n_layers - top_layers, n_layers)),
            "layers_pattern": "layers",
        }
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    else:
        targets = "all-linear"
    return LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, task_type="CAUSAL_LM", **kwargs)


def build_sft_trainer(
    cfg: SFTRunConfig, samples: list[dict[str, Any]], run_dir: str | Path, with_eval: bool = False
):
    """The `trl.SFTTrainer` of `run_sft` (prompt/completion data, completion-only loss), and its base path.

    `with_eval` also hands the training samples in as the evaluation set (`trainer.evaluate()` then
    reports the completion-only loss on them); it costs a second tokenisation pass, so training skips it.
    """
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    if not samples:
        raise ValueError("no SFT samples: check `sft.tiers` against the generated dataset.")
    check_schema(samples[0]["schema_version"], SCHEMA_VERSION)
    if cfg.max_samples and len(samples) > cfg.max_samples:
        samples = random.Random(cfg.seed).sample(samples, cfg.max_samples)
    run_dir = Path(run_dir)
    base = prepare_base_model(cfg, samples, run_dir)
    tok = AutoTokenizer.from_pretrained(base)
    check_chat_model(tok, base)
    dtype = model_dtype(cfg.dtype)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    ds = Dataset.from_list([{"prompt": s["prompt"], "completion": s["completion"]} for s in samples]).shuffle(
        cfg.seed
    )
    peft_config = lora_config(model, cfg.lora_r, cfg.lora_layers) if cfg.lora else None
    args = SFTConfig(
        output_dir=str(run_dir / "sft_checkpoints"),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.warmup_steps,
        max_length=cfg.max_length,
        completion_only_loss=True,  # the loss covers the action tokens only, never the observation
        **trainer_common_args(dtype, cfg.seed, logging_steps=20, save_steps=100),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        eval_dataset=ds if with_eval else None,
        processing_class=tok,
        peft_config=peft_config,
    )
    return trainer, base


def run_sft(cfg: SFTRunConfig, samples: list[dict[str, Any]], run_dir: str | Path) -> dict[str, Any]:
    """Train on `samples` (from `dialogue.to_samples`); save the (merged) model to `run_dir/sft`."""
    run_dir = Path(run_dir)
    trainer, base = build_sft_trainer(cfg, samples, run_dir)
    tok = trainer.processing_class
    result = trainer.train(resume_from_checkpoint=last_checkpoint(run_dir / "sft_checkpoints"))
    final = trainer.model
    if cfg.lora:
        final = final.merge_and_unload()
    final.save_pretrained(run_dir / "sft")
    tok.save_pretrained(run_dir / "sft")
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    metrics = {
        "train_loss": result.training_loss,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "samples": len(trainer.train_dataset),
        "base": base,
        "dtype": str(model_dtype(cfg.dtype)),
        "lora": cfg.lora,
        **result.metrics,
    }
    (run_dir / "sft" / "dlm_sft.json").write_text(json.dumps(metrics, indent=2, default=str))
    return metrics
