"""Attention masks for sliding-window layers, measured in real token positions.

transformers builds sliding-window masks over cache indices. With left padding that is exact only
while no pads sit inside a row's window: a batch that appends a padded segment after a state (a suffix,
a decode step of a finished row, an agent's prompt) has pads in the middle, and a row's window then
covers fewer real tokens than the same row alone. latentworks keeps every position in the cache
(no window truncation, so KV views and crops stay position-exact) and passes masks whose window is
counted in position ids: key j is visible from query i when it is real, not after i in the cache,
and `pos(i) - pos(j) < window`, exactly as HF's own rule on an unpadded row.

Shapes: B = batch, t = positions in this forward, K = cached + new positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class WindowSpec:
    """Which attention kinds a model has and their windows (None = full attention)."""

    windows: dict[str, int | None]
    as_dict: bool  # the model reads a {layer type: mask} mapping (Gemma 3, Qwen2/3) or one 4D mask (Mistral)


def window_spec(config) -> WindowSpec | None:
    """The sliding-window layout of a decoder config, or None when every layer attends fully."""
    layer_types = getattr(config, "layer_types", None) or []
    window = getattr(config, "sliding_window", None)
    if "sliding_attention" in layer_types and window:
        kinds = {kind: (int(window) if kind == "sliding_attention" else None) for kind in set(layer_types)}
        return WindowSpec(windows=kinds, as_dict=True)
    if not layer_types and window and getattr(config, "model_type", "") in ("mistral", "mixtral"):
        return WindowSpec(windows={"sliding_attention": int(window)}, as_dict=False)
    return None


def check_attention(spec: WindowSpec | None, attn_implementation: str | None) -> None:
    """Raise ValueError when the model's attention implementation cannot take the masks this model gets
    (flash attention and the 4-D masks of sliding-window models, see `latent.attention`)."""
    from latent.attention import attention_problem, is_flash

    if spec is not None and is_flash(attn_implementation):
        raise ValueError(attention_problem(attn_implementation, sliding_window=True) + ".")


def positional_masks(
    spec: WindowSpec, key_mask: torch.Tensor, key_positions: torch.Tensor, t: int, dtype: torch.dtype
) -> dict[str, torch.Tensor] | torch.Tensor:
    """Additive float masks (B, 1, t, K) for the last `t` of K positions, one per attention kind.

    key_mask (B, K): 1 for real positions. key_positions (B, K): position id of every cached position.
    Each position also sees itself, so a pad query never has an empty row (its output is unused).
    """
    b, k = key_mask.shape
    device = key_mask.device
    q_idx = torch.arange(k - t, k, device=device)
    k_idx = torch.arange(k, device=device)
    causal = k_idx[None, :] <= q_idx[:, None]  # (t, K)
    itself = k_idx[None, :] == q_idx[:, None]
    base = key_mask.bool()[:, None, :] & causal[None]  # (B, t, K)
    q_pos = key_positions[:, k - t :]
    gap = q_pos[:, :, None] - key_positions[:, None, :]  # (B, t, K)
    lowest = torch.finfo(dtype).min
    masks = {}
    for kind, window in spec.windows.items():
        visible = base if window is None else base & (gap < window)
        visible = visible | itself[None]
        masks[kind] = torch.zeros((b, 1, t, k), dtype=dtype, device=device).masked_fill(
            ~visible[:, None], lowest
        )
    return masks if spec.as_dict else masks["sliding_attention"]
