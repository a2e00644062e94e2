"""One pass over scenario prompts for the three E1 instruments: the probe activation at the last prompt
token, the greedy reply, and elicited P(evaluation).

Read separately, each scenario is prefilled three times (capture, the elicitation prompt, generation).
Here the tokens the scenario prompt and its elicitation prompt share (system prompt and request, up to
where the question is appended) are prefilled once; the scenario's remaining tokens are read after that
state under `capture`, the reply is generated from there, and the question is read after the same
shared state. Batches hold prompts of similar length, so little compute goes to padding. Results come
back in the order of `items` and match the separate calls up to float rounding
(`tests/probes/test_scenario_pass.py`).

Only public `LatentModel` calls are used: `prefill(state=...)`, `capture`, `generate(state=...)`, `logits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.activations import ActivationSet, render
from probes.data import Item
from probes.elicit import elicit_items, letter_probs

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = ["ScenarioReadings", "length_order", "left_pad", "read_scenarios"]


@dataclass
class ScenarioReadings:
    """What `read_scenarios` returns, one row per item in input order."""

    acts: ActivationSet
    texts: list[str]
    p_eval: np.ndarray | None
    mass: np.ndarray | None


def length_order(lengths: list[int]) -> list[int]:
    """Indices sorted by length (stable), so a batch pads to a length close to its own prompts'."""
    return sorted(range(len(lengths)), key=lambda i: lengths[i])


def left_pad(rows: list[list[int]], pad_id: int, device) -> dict[str, torch.Tensor]:
    """Left-padded `input_ids` / `attention_mask` from token-id lists (the layout `encode` returns)."""
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + r for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long, device=device),
        "attention_mask": torch.tensor(mask, dtype=torch.long, device=device),
    }


def _shared(a: list[int], b: list[int]) -> int:
    """Length of the common token prefix, leaving at least one token of each sequence to read after it."""
    k, stop = 0, min(len(a), len(b)) - 1
    while k < stop and a[k] == b[k]:
        k += 1
    return k


@torch.no_grad()
def read_scenarios(
    m: LatentModel,
    items: list[Item],
    layers: list[int],
    max_new_tokens: int = 24,
    batch_size: int = 32,
    elicit: bool = True,
    model_name: str = "",
) -> ScenarioReadings:
    """Last-token activations at `layers`, greedy replies and (with `elicit`) P(eval) and letter mass."""
    if not items:
        raise ValueError("`items` is empty: nothing to read.")
    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError(f"`batch_size` ({batch_size}) and `max_new_tokens` ({max_new_tokens}) must be >= 1.")
    idx = [m.layer_index(x) for x in layers]
    if not idx:
        raise ValueError("`layers` is empty: name at least one decoder layer.")
    tok, pad = m.tokenizer, int(m.tokenizer.pad_token_id)
    scn = [tok.encode(render(m, Item(it.messages)), add_special_tokens=False) for it in items]
    asked = elicit_items(items) if elicit else items
    eli = [tok.encode(render(m, it), add_special_tokens=False) for it in asked] if elicit else scn
    cut = [_shared(a, b) if elicit else len(a) - 1 for a, b in zip(scn, eli)]
    n = len(items)
    vecs = {i: np.zeros((n, m.hidden_size), np.float32) for i in idx}
    texts: list[str] = [""] * n
    p_eval, mass = np.zeros(n), np.zeros(n)
    order = length_order([len(s) for s in scn])
    for start in range(0, n, batch_size):
        rows = order[start : start + batch_size]
        shared = m.prefill(**left_pad([scn[r][: cut[r]] for r in rows], pad, m.device))
        with m.capture(idx) as acts:
            st = m.prefill(**left_pad([scn[r][cut[r] :] for r in rows], pad, m.device), state=shared)
        for i in idx:
            vecs[i][rows] = acts[i][0][:, -1].float().cpu().numpy()  # left padding: last token is real
        gen = m.generate(state=st, max_new_tokens=max_new_tokens)
        for r, text in zip(rows, gen.texts):
            texts[r] = text
        if elicit:
            q = m.prefill(**left_pad([eli[r][cut[r] :] for r in rows], pad, m.device), state=shared)
            pe, ms = letter_probs(m, q.last_hidden, [asked[r] for r in rows])
            p_eval[rows], mass[rows] = pe, ms
    aset = ActivationSet(vecs, [dict(it.meta) for it in items], "last", model_name)
    return ScenarioReadings(aset, texts, p_eval if elicit else None, mass if elicit else None)
