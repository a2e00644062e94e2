"""Constrained decoding to legal actions on CPU: a logits processor for `LatentModel.generate`.

Each row gets its own legal set. At decoding step n a token is allowed only if some legal action's
token sequence (the action word followed by the end-of-turn token) starts with the row's generated
prefix and continues with that token, so any finished row holds exactly one legal action word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from finetune.dlm.dialogue import action_names

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from latent import LatentModel

__all__ = ["LegalActionProcessor", "action_token_ids", "generate_actions"]


def action_token_ids(tokenizer: PreTrainedTokenizerBase, env_name: str) -> list[list[int]]:
    """Token ids of every action word + end-of-turn, as the chat template lays out an assistant turn."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no `eos_token`: constrained decoding needs an end-of-turn token.")
    return [tokenizer.encode(name, add_special_tokens=False) + [int(eos)] for name in action_names(env_name)]


class LegalActionProcessor:
    """`(generated_ids (B, n), scores (B, V)) -> scores` with everything but legal continuations at -inf."""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, env_name: str, legal: Sequence[Sequence[int]]
    ) -> None:
        self.seqs = action_token_ids(tokenizer, env_name)
        self.eos = int(tokenizer.eos_token_id)
        self.legal = [list(lg) for lg in legal]
        for row, lg in enumerate(self.legal):
            if not lg or any(not 0 <= a < len(self.seqs) for a in lg):
                raise ValueError(
                    f"row {row}: legal set {lg} must be non-empty indices below {len(self.seqs)}."
                )

    def __call__(self, generated: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if generated.shape[0] != len(self.legal):
            raise ValueError(f"batch of {generated.shape[0]} rows but {len(self.legal)} legal sets.")
        n = generated.shape[1]
        mask = torch.full_like(scores, float("-inf"))  # (B, V)
        for b, lg in enumerate(self.legal):
            prefix = generated[b].tolist()
            allowed = {self.seqs[a][n] for a in lg if len(self.seqs[a]) > n and self.seqs[a][:n] == prefix}
            mask[b, sorted(allowed or {self.eos})] = 0.0  # finished rows: generate pads them anyway
        return scores + mask


def generate_actions(
    lm: LatentModel,
    env_name: str,
    prompts: list[list[dict[str, str]]],
    legal: Sequence[Sequence[int]],
    constrained: bool,
    max_new_tokens: int = 4,
) -> list[str]:
    """Greedy action texts for a batch of chat prompts, optionally constrained to each row's legal set."""
    batch = lm.encode(prompts, chat=True)
    procs = [LegalActionProcessor(lm.tokenizer, env_name, legal)] if constrained else []
    if constrained:  # the longest action must fit, or a constrained row could be cut mid-word
        max_new_tokens = max(max_new_tokens, max(len(s) for s in procs[0].seqs))
    out = lm.generate(
        batch["input_ids"], batch["attention_mask"], max_new_tokens=max_new_tokens, logits_processor=procs
    )
    return out.texts
