"""Batching on a CPU: the rows of a left-padded segment read in groups of similar length.

A batch of prompts of different lengths, read in one forward, spends compute on every pad. On a CPU a
forward costs its rows' compute plus reading every weight once, so reading the rows in a few groups,
each padded only to its own longest row, can cost less: `pad_groups` decides (and how), and
`forward_groups` reads the groups and joins them into the state one forward would give.
`LatentModel.prefill` uses both (`LatentModel.group_pads` turns it off).

Shapes: B = batch, T = positions, D = hidden size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from latent.kv_cache import layer_tensors
from latent.state import LatentState

__all__ = ["GROUP_OVERHEAD", "forward_groups", "length_groups", "pad_groups"]

GROUP_OVERHEAD = 24
"""Rows of compute one extra forward call costs on a CPU (it reads every weight once more): measured on
SmolLM2-135M, one cached decode step took as long as prefilling about 20 tokens."""

Forward = Callable[[torch.Tensor, torch.Tensor, "LatentState | None"], tuple[torch.Tensor, LatentState]]
"""`LatentModel._forward`: (embeds (B, T, D), mask (B, T), state) -> (hidden, extended state)."""


def pad_groups(
    mask: torch.Tensor, layers: nn.ModuleList, device: torch.device
) -> list[tuple[torch.Tensor, int]] | None:
    """Rows of a left-padded segment split into groups of similar length, each read padded only to its
    own longest row, when that saves enough of the work spent on pads (None: read it in one go).
    A group is charged `GROUP_OVERHEAD` extra rows. Off on accelerators (batching is almost free
    there), under autograd, and while hooks watch the decoder `layers` (they would see one call per
    group)."""
    b, t = mask.shape
    if b < 2 or t < 2 or b > 256 or device.type != "cpu":
        return None
    if torch.is_grad_enabled():
        return None
    if any(_watched(layer) for layer in layers):
        return None
    lengths = mask.sum(1)
    left_padded = torch.arange(t, device=mask.device)[None, :] >= (t - lengths)[:, None]
    if not bool((mask.bool() == left_padded).all()):
        return None
    order = torch.argsort(lengths, stable=True)
    sizes = [max(int(n), 1) for n in lengths[order]]
    groups = length_groups(sizes, GROUP_OVERHEAD)
    cost = sum((j - i) * sizes[j - 1] + GROUP_OVERHEAD for i, j in groups)
    if cost > 0.9 * (b * t + GROUP_OVERHEAD) or len(groups) == 1:
        return None
    return [(order[i:j], sizes[j - 1]) for i, j in groups]


def forward_groups(
    forward: Forward,
    embeds: torch.Tensor,
    mask: torch.Tensor,
    state: LatentState | None,
    groups: list[tuple[torch.Tensor, int]],
    cache,
) -> LatentState:
    """`forward` of a segment read group by group (`pad_groups`), joined into the state one call would
    give: the same layout, every real position's keys and values (pad positions hold zeros and stay
    masked), each row's own last hidden state. `cache` receives the joined keys and values: `state`'s
    own cache, or a new empty one when there is no state."""
    b, t = mask.shape
    past = 0 if state is None else state.length
    last_hidden = embeds.new_empty((b, embeds.shape[-1]))
    parts = []
    for idx, width in groups:
        sub = None if state is None else state.select_rows(idx, room=width)
        _, out = forward(embeds[idx, t - width :], mask[idx, t - width :], sub)
        last_hidden[idx] = out.last_hidden
        parts.append((idx, width, layer_tensors(out.cache)))
    for li in range(len(parts[0][2])):
        k0, v0 = parts[0][2][li]
        keys = k0.new_zeros((b, k0.shape[1], t, k0.shape[3]))
        values = v0.new_zeros((b, v0.shape[1], t, v0.shape[3]))
        for idx, width, layers in parts:
            k, v = layers[li]
            keys[idx, :, t - width :] = k[:, :, past:]
            values[idx, :, t - width :] = v[:, :, past:]
        cache.update(keys, values, li)
    if state is None:
        past_mask = past_pos = mask.new_zeros((b, 0))
        next_pos = mask.new_zeros((b,))
    else:
        past_mask, past_pos, next_pos = state.attention_mask, state.position_ids(), state.next_position
    positions = (next_pos[:, None] + mask.cumsum(1) - 1).clamp_min(0)
    return LatentState(
        cache=cache,
        attention_mask=torch.cat([past_mask, mask], dim=1),
        last_hidden=last_hidden,
        next_position=next_pos + mask.sum(1),
        positions=torch.cat([past_pos, positions], dim=1),
    )


def _watched(layer: nn.Module) -> bool:
    """True when a hook other than transformers' own output recorder (installed once a model is run with
    `output_hidden_states`, idle otherwise) watches `layer`."""
    hooks = [*layer._forward_hooks.values(), *layer._forward_pre_hooks.values()]
    return any(getattr(h, "__name__", "") != "output_capturing_hook" for h in hooks)


def length_groups(sizes: list[int], overhead: int) -> list[tuple[int, int]]:
    """Split ascending `sizes` into runs [i, j) minimising sum((j - i) * sizes[j - 1] + overhead)."""
    n = len(sizes)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            c = best[i] + (j - i) * sizes[j - 1] + overhead
            if c < best[j]:
                best[j], cut[j] = c, i
    runs, j = [], n
    while j > 0:
        runs.append((cut[j], j))
        j = cut[j]
    return runs[::-1]
