"""Activation datasets: residual-stream vectors at chosen layers and token positions, saved to disk.

All access goes through `LatentModel.capture` (the one hook system). Positions:

* `"last"`: the last prompt token (after the assistant header), as in persona vectors / repeng.
* `"answer"`: the last token of `Item.answer` appended after the assistant header (CAA / Nguyen et al.
  read the A/B answer-letter token). Items without an answer raise.
* `"mean_response"`: the mean over the tokens the model generates greedily (Apollo-style response
  averaging); the generated texts are kept in `meta["response"]` so behaviour and activations come
  from the same pass.

Shapes: N = items, D = hidden size, B = batch, T = positions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.data import Item

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = ["POSITIONS", "ROLE_LABELS", "ActivationSet", "capture_items", "render", "transcript"]

log = logging.getLogger(__name__)
POSITIONS = ("last", "answer", "mean_response")


@dataclass
class ActivationSet:
    """layer -> (N, D) float32 activations, one `meta` dict per item, and how they were read."""

    acts: dict[int, np.ndarray]
    meta: list[dict]
    position: str
    model: str = ""

    def __post_init__(self) -> None:
        if not self.acts:
            raise ValueError("`acts` is empty: capture at least one layer.")
        for layer, x in self.acts.items():
            if x.ndim != 2 or x.shape[0] != len(self.meta):
                raise ValueError(
                    f"layer {layer}: activations {x.shape} do not match {len(self.meta)} meta rows."
                )
            if not np.isfinite(x).all():
                raise ValueError(
                    f"layer {layer}: activations contain NaN or inf; check the model's dtype/overflow."
                )

    @property
    def layers(self) -> list[int]:
        return sorted(self.acts)

    def column(self, key: str) -> np.ndarray:
        """One metadata field as an array (e.g. `column("cue")`)."""
        missing = [i for i, m in enumerate(self.meta) if key not in m]
        if missing:
            raise ValueError(f"meta key {key!r} missing on {len(missing)} items (first: {missing[0]}).")
        return np.array([m[key] for m in self.meta])

    def subset(self, mask: np.ndarray) -> ActivationSet:
        """Rows where `mask` is True (a boolean array of length N)."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(self.meta),):
            raise ValueError(f"`mask` must have shape ({len(self.meta)},), got {mask.shape}.")
        if not mask.any():
            raise ValueError("`mask` selects no items.")
        meta = [m for m, keep in zip(self.meta, mask) if keep]
        return ActivationSet({k: v[mask] for k, v in self.acts.items()}, meta, self.position, self.model)

    def save(self, path: str | Path) -> Path:
        """Write to `path` (torch.save of plain tensors and JSON-like metadata)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        acts = {int(k): torch.from_numpy(v) for k, v in self.acts.items()}
        torch.save({"acts": acts, "meta": self.meta, "position": self.position, "model": self.model}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> ActivationSet:
        """Read a file written by `save` (weights_only loading: no code execution)."""
        blob = torch.load(Path(path), weights_only=True)
        acts = {int(k): v.numpy() for k, v in blob["acts"].items()}
        return cls(acts, blob["meta"], blob["position"], blob.get("model", ""))


ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}


def transcript(messages: list[dict], bos: str = "") -> str:
    """A plain dialogue transcript for base models without a chat template: `bos`, then one
    "Role: text" paragraph per message, ending with "Assistant:" for the model to continue."""
    bad = [m.get("role") for m in messages if m.get("role") not in ROLE_LABELS]
    if bad:
        raise ValueError(f"unknown message role {bad[0]!r}: use one of {sorted(ROLE_LABELS)}.")
    turns = "".join(f"{ROLE_LABELS[m['role']]}: {m['content']}\n\n" for m in messages)
    return f"{bos}{turns}Assistant:"


def render(m: LatentModel, item: Item) -> str:
    """Prompt text of `item` under the model's chat template (a plain `transcript` when the tokenizer has
    none, as for base models), with `item.answer` appended if present (after a space in a transcript)."""
    tok = m.tokenizer
    if tok.chat_template is None:
        text = transcript(item.messages, tok.bos_token or "")
        return text + (" " + item.answer if item.answer else "")
    text = tok.apply_chat_template(item.messages, tokenize=False, add_generation_prompt=True)
    return text + (item.answer or "")


def _batches(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


@torch.no_grad()
def capture_items(
    m: LatentModel,
    items: list[Item],
    layers: list[int | str],
    position: str = "last",
    batch_size: int = 16,
    max_new_tokens: int = 24,
    model_name: str = "",
) -> ActivationSet:
    """Capture residual-stream activations of `items` at `layers` and `position` (see module doc).

    Args:
        m (`LatentModel`): the model.
        items (`list[Item]`): prompts; for `position="answer"` each needs `answer`.
        layers (`list[int | str]`): decoder-layer indices or module paths ("model.layers.3").
        position (`str`, defaults to `"last"`): "last", "answer" or "mean_response".
        batch_size (`int`): items per forward pass.
        max_new_tokens (`int`): generation length for "mean_response".
    """
    if not items:
        raise ValueError("`items` is empty: capture needs at least one prompt.")
    if position not in POSITIONS:
        raise ValueError(f"unknown `position`={position!r}: use one of {POSITIONS}.")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size}.")
    if position == "answer" and any(it.answer is None for it in items):
        raise ValueError("`position='answer'` needs `Item.answer` on every item; use 'last' otherwise.")
    idx = [m.layer_index(x) for x in layers]
    if not idx:
        raise ValueError("`layers` is empty: name at least one decoder layer.")
    texts = [render(m, it) if position == "answer" else render(m, Item(it.messages)) for it in items]
    out = {i: np.zeros((len(items), m.hidden_size), np.float32) for i in idx}
    meta = [dict(it.meta) for it in items]
    lengths = [len(m.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    order = sorted(range(len(items)), key=lambda j: lengths[j])  # similar lengths per batch: less padding
    for sl in _batches(len(items), batch_size):
        rows = order[sl]
        enc = m.encode([texts[j] for j in rows])
        with m.capture(idx) as acts:
            if position == "mean_response":
                gen = m.generate(**enc, max_new_tokens=max_new_tokens, return_state=True)
            else:
                m.prefill(**enc)
        for i in idx:
            if position == "mean_response":
                steps = torch.cat(acts[i][1:], dim=1).float()  # (B, N, D): hidden at each generated token
                n = steps.shape[1]
                real = (torch.arange(n)[None, :] < gen.lengths.cpu()[:, None]).float().to(steps.device)
                vec = (steps * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp_min(1)  # (B, D)
            else:
                vec = acts[i][0][:, -1].float()  # (B, D): left padding puts the last real token at -1
            out[i][rows] = vec.cpu().numpy()
        if position == "mean_response":
            for j, text in zip(rows, gen.texts):
                meta[j]["response"] = text
    log.debug("captured %d items at layers %s (%s)", len(items), idx, position)
    return ActivationSet(out, meta, position, model_name)
