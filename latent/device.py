"""Device and precision choice for training and evaluation, in one place (the DLM trainers and the
probes' LoRA organisms share it, so it stands below both).

On CPU everything runs in fp32 (TRL's bf16 default either fails there or runs 6-26x slower without bf16
hardware). On a GPU the weights load in bf16 where the card supports it, else fp16, and the trainers get
the matching mixed-precision flag; evaluation runs on whatever device the model was loaded on.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["model_dtype", "no_activation_checkpointing", "trainer_common_args", "trainer_device_args"]


def model_dtype(name: str = "auto") -> torch.dtype:
    """'auto' -> bf16 on a bf16-capable GPU, fp16 on another GPU, fp32 on CPU; else the named dtype."""
    if name != "auto":
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {name!r}: use auto, float32, bfloat16 or float16.")
        return dtype
    if not torch.cuda.is_available():
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def trainer_device_args(dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """`SFTConfig`/`GRPOConfig` precision and device flags that match the model's dtype."""
    if not torch.cuda.is_available():
        return {"use_cpu": True, "bf16": False, "fp16": False}
    return {"bf16": dtype == torch.bfloat16, "fp16": dtype == torch.float16}


def trainer_common_args(
    dtype: torch.dtype, seed: int, *, logging_steps: int, save_steps: int
) -> dict[str, Any]:
    """The `SFTConfig`/`GRPOConfig` settings both stages share: one resumable checkpoint kept every
    `save_steps`, no reporting integrations, data loaded in the main process, the device flags."""
    return {
        "logging_steps": logging_steps,
        "save_strategy": "steps",
        "save_steps": save_steps,
        "save_total_limit": 1,
        "report_to": [],
        "seed": seed,
        "dataloader_num_workers": 0,
        **no_activation_checkpointing(),
        **trainer_device_args(dtype),
    }


def no_activation_checkpointing() -> dict[str, bool]:
    """TRL's configs turn activation (gradient) checkpointing on, which recomputes every forward during the
    backward pass: memory that models of this size do not need, paid for in time. The field was renamed
    in transformers 5.2x; this names whichever the installed version has."""
    from transformers import TrainingArguments

    fields = TrainingArguments.__dataclass_fields__
    return {
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing": False
    }
