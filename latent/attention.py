"""Which attention implementation a model may run with latentworks' masks, checked before it loads.

latentworks passes transformers either the usual 2-D padding mask (B, K) or, for models with
sliding-window layers, 4-D additive masks (B, 1, t, K) whose window is counted in real positions
(`latent.masks`). transformers returns a 4-D mask to the attention function as it is
(`masking_utils._preprocess_mask_arguments`: "If the mask is already 4D, simply return as-is"), and its
flash-attention path reads any mask as a (B, K) padding mask to unpad the sequences
(`modeling_flash_attention_utils._upad_input`): a 4-D float mask there is either rejected or read
wrongly. So flash attention is refused for sliding-window models, with `sdpa` (the default) named as
the fix; 2-D masks (every other model) work with it, pads in the middle of a row included, since the
unpadding keeps each row's real keys in order.

Imports nothing heavy, so configuration classes validate the name without importing torch.
"""

from __future__ import annotations

__all__ = ["ATTN_IMPLEMENTATIONS", "attention_problem", "is_flash"]

ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
"""The names transformers accepts for `attn_implementation` (a hub kernel, "org/name", is accepted too)."""


def is_flash(name: str | None) -> bool:
    """Whether `name` selects a flash-attention kernel (built in or from the kernels hub)."""
    return bool(name) and "flash" in str(name).lower()


def attention_problem(
    name: str | None, *, sliding_window: bool = False, device: str | None = None
) -> str | None:
    """Why `attn_implementation=name` cannot serve a model (None when it can).

    `sliding_window`: the model has sliding-window layers, so latentworks gives it 4-D masks.
    `device`: where the model will run ("cpu", "cuda:1", ...), when known."""
    if name is None or name == "":
        return None
    if not isinstance(name, str) or (name not in ATTN_IMPLEMENTATIONS and "/" not in name):
        return (
            f"unknown `attn_implementation` {name!r}: use one of {', '.join(ATTN_IMPLEMENTATIONS)} "
            "(or a kernels-hub name such as 'kernels-community/flash-attn')"
        )
    if is_flash(name) and sliding_window:
        return (
            f"`attn_implementation={name!r}` cannot serve this model: it has sliding-window layers, which "
            "latentworks masks with 4-D position masks, and flash attention reads only 2-D padding masks. "
            "Use attn_implementation='sdpa' (the default) or 'eager'"
        )
    if is_flash(name) and device is not None and not str(device).startswith("cuda"):
        return f"`attn_implementation={name!r}` runs on CUDA devices only, not on {device!r}: use 'sdpa'"
    return None
