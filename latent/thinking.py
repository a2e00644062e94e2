"""Thinking models (Qwen3 and other chat templates with a `<think>...</think>` block).

Qwen3's template takes an `enable_thinking` switch (on by default): with it on, an answer opens with a
`<think>` block that can run for thousands of tokens before the answer proper. latentworks lets a run
switch it (`RunConfig.enable_thinking`, handed to the template), caps the block (`ThinkingBudget`, a
logits processor that closes it after `budget` tokens), and scores only what follows it
(`strip_thinking`).

Shapes: B = batch, n = tokens generated so far, V = vocabulary.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: scoring imports `strip_thinking` without torch
    import torch

__all__ = ["THINK_CLOSE", "THINK_OPEN", "ThinkingBudget", "strip_thinking", "template_thinks", "think_ids"]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_BLOCK = re.compile(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), re.DOTALL)


def strip_thinking(text: str) -> str:
    """The answer after a model's thinking: closed `<think>...</think>` blocks removed, everything up to a
    `</think>` whose `<think>` was in the prompt removed, and an unclosed `<think>` (cut off while still
    thinking) removed to the end. Text without these tags comes back unchanged."""
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return text
    out = _BLOCK.sub("", text)
    if THINK_CLOSE in out:  # opened by the prompt (e.g. a template that ends with "<think>\n")
        out = out.rsplit(THINK_CLOSE, 1)[1]
    if THINK_OPEN in out:  # still thinking when decoding stopped: no answer yet
        out = out.split(THINK_OPEN, 1)[0]
    return out.strip()


def think_ids(tokenizer) -> tuple[int, int] | None:
    """The single-token ids of `<think>` and `</think>`, or None when the vocabulary lacks either."""
    vocab = tokenizer.get_vocab()
    if THINK_OPEN in vocab and THINK_CLOSE in vocab:
        return int(vocab[THINK_OPEN]), int(vocab[THINK_CLOSE])
    return None


def template_thinks(tokenizer, enable_thinking: bool | None) -> bool:
    """Whether answers decoded after this tokenizer's chat template open with a thinking block: the
    vocabulary has both tags as single tokens and the switch is on (`True`), or left to the template
    (`None`) whose text mentions `<think>` (Qwen3 thinks by default; Qwen2.5's template never does)."""
    if enable_thinking is False or think_ids(tokenizer) is None:
        return False
    if enable_thinking:
        return True
    return THINK_OPEN in str(getattr(tokenizer, "chat_template", None) or "")


class ThinkingBudget:
    """Logits processor that closes a row's thinking after `budget` generated tokens: once a row has
    generated `budget` tokens with a `<think>` among them and no `</think>` yet, its next token is forced
    to `</think>`, so the answer still fits in the decode budget. Rows that never opened a block (or
    closed it) are left alone. Vectorised on the device: no host synchronisation per step.

    Example:
        >>> ids = think_ids(model.tokenizer)
        >>> out = model.generate(**batch, max_new_tokens=1024 + 256, logits_processor=[ThinkingBudget(*ids, 1024)])
    """

    def __init__(self, open_id: int, close_id: int, budget: int, opened_by_prompt: bool = False) -> None:
        if budget < 1:
            raise ValueError(f"`thinking_budget` must be >= 1, got {budget}.")
        self.open_id, self.close_id, self.budget = open_id, close_id, budget
        self.opened_by_prompt = opened_by_prompt

    def __call__(self, generated: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """generated (B, n), scores (B, V) -> scores with `</think>` forced where the budget ran out."""
        n = generated.shape[1]
        if n < self.budget:
            return scores
        opened = (generated == self.open_id).any(1) | self.opened_by_prompt  # (B,)
        closed = (generated == self.close_id).any(1)
        force = (opened & ~closed)[:, None]  # (B, 1)
        only_close = scores.new_full(scores.shape, float("-inf"))
        only_close[:, self.close_id] = 0.0
        return only_close.where(force, scores)
