"""Forward hooks on decoder layers: read the residual stream (`capture`) or edit it (`steer`).

The only hook system in latentworks; probes and agents use it through `LatentModel.capture/steer`.
Shapes: B = batch, T = positions in one forward call, D = hidden size.

A decoder layer's output is its residual stream after the layer. transformers 5.x Llama/Qwen/Mistral/
GPT-2 layers return a tensor, some (Gemma3) a tuple whose first item is the hidden state: both work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

MaskGetter = Callable[[], "torch.Tensor | None"]
"""Returns the (B, T_total) attention mask of the forward in flight, or None when unknown."""


def _split(output: object) -> tuple[torch.Tensor, Callable[[torch.Tensor], object]]:
    """Hidden state (B, T, D) of a layer output plus a function that rebuilds the output around a new one."""
    if isinstance(output, torch.Tensor):
        return output, lambda h: h
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0], lambda h: (h, *output[1:])
    raise TypeError(
        f"decoder layer returned {type(output).__name__}; expected a tensor or a tuple (tensor, ...)."
    )


class Activations(dict):
    """Layer index -> list of (B, T, D) tensors, one per forward call, in call order.

    `acts.stacked(i)` concatenates the calls along positions: with a KV cache, prefill + each decode
    step, i.e. the layer's residual stream over the whole sequence.
    """

    def stacked(self, layer: int) -> torch.Tensor:
        if layer not in self or not self[layer]:
            raise KeyError(f"no activations recorded for layer {layer}; recorded: {sorted(self)}")
        return torch.cat(self[layer], dim=1)


@contextmanager
def capture_layers(layers: dict[int, nn.Module], detach: bool = True) -> Iterator[Activations]:
    """Record the outputs of `layers` (index -> module) while the context is open."""
    acts = Activations({i: [] for i in layers})
    handles = []

    def make_hook(idx: int):
        def hook(_module: nn.Module, _args: tuple, output: object) -> None:
            hidden, _ = _split(output)
            acts[idx].append(hidden.detach() if detach else hidden)

        return hook

    try:
        for idx, module in layers.items():
            handles.append(module.register_forward_hook(make_hook(idx)))
        yield acts
    finally:
        for h in handles:
            h.remove()


def _real_positions(mask_getter: MaskGetter | None, hidden: torch.Tensor) -> torch.Tensor | None:
    """(B, T, 1) float mask of real (non-pad) positions of this call, or None if unknown."""
    mask = mask_getter() if mask_getter is not None else None
    if mask is None:
        return None
    t = hidden.shape[1]
    return mask[:, -t:].to(hidden.dtype).unsqueeze(-1)


def steer_direction(hidden: torch.Tensor, vector: torch.Tensor, alpha: float, mode: str) -> torch.Tensor:
    """Edited hidden state. add: h + alpha v; ablate: remove the component along v;
    clamp: set the component along unit(v) to alpha."""
    v = vector.to(device=hidden.device, dtype=hidden.dtype)
    if mode == "add":
        return hidden + alpha * v
    unit = v / v.norm().clamp_min(1e-12)
    proj = (hidden * unit).sum(-1, keepdim=True)  # (B, T, 1)
    if mode == "ablate":
        return hidden - proj * unit
    if mode == "clamp":
        return hidden + (alpha - proj) * unit
    raise ValueError(f"unknown steering `mode`={mode!r}: use 'add', 'ablate' or 'clamp'.")


@contextmanager
def steer_layer(
    module: nn.Module,
    vector: torch.Tensor,
    alpha: float,
    mode: str,
    mask_getter: MaskGetter | None = None,
) -> Iterator[None]:
    """Edit `module`'s output along `vector` at real positions only (pads untouched)."""
    if mode not in ("add", "ablate", "clamp"):
        raise ValueError(f"unknown steering `mode`={mode!r}: use 'add', 'ablate' or 'clamp'.")

    def hook(_module: nn.Module, _args: tuple, output: object) -> object:
        hidden, rebuild = _split(output)
        edited = steer_direction(hidden, vector, alpha, mode)
        real = _real_positions(mask_getter, hidden)
        if real is not None:
            edited = real * edited + (1 - real) * hidden
        return rebuild(edited)

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
