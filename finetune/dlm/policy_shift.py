"""How far GRPO moved the policy from SFT: first-action choices and KL on the same execution prompts.

For each prompt both models read the same chat prompt once; at the first completion position we compare
(a) the free-decoding first token (argmax over the vocabulary), (b) the legal-constrained choice (argmax
over the first tokens of the legal action words, which is what greedy constrained decoding picks when
every action word starts with its own token), and the KL divergences KL(GRPO || SFT) of the full next-token
distribution and of the distribution renormalised over the legal actions. Rates get Wilson intervals.

`python bench/dlm_policy_shift.py RUN_DIR --seeds 0 1 2 --prompts 240 --out report.json`
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eval.report import wilson
from finetune.dlm.decoding import action_token_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["compare_first_actions", "first_action_logits", "policy_shift"]


@torch.no_grad()
def first_action_logits(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, prompts: list[list[dict]], batch_size: int = 8
) -> torch.Tensor:
    """(P, V) next-token log-probabilities at the first completion position of each chat prompt."""
    tok.padding_side = "left"
    out = []
    for i in range(0, len(prompts), batch_size):
        texts = [
            tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
            for p in prompts[i : i + batch_size]
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        logits = model(**enc).logits[:, -1].float()
        out.append(torch.log_softmax(logits, -1))
    return torch.cat(out)


def policy_shift(
    sft_dir: str | Path,
    grpo_dir: str | Path,
    env_name: str,
    samples: list[dict[str, Any]],
    batch_size: int = 8,
) -> dict[str, Any]:
    """Changed first-action choices (free and legal-constrained) and KL(GRPO || SFT) on `samples`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(sft_dir))
    first = [ids[0] for ids in action_token_ids(tok, env_name)]
    if len(set(first)) != len(first):
        raise ValueError(
            f"{env_name}'s action words share first tokens under this tokenizer; the first-token choice "
            "is not the constrained decode. Compare `generate_actions(..., constrained=True)` instead"
        )
    prompts = [s["prompt"] for s in samples]
    lp = {}
    for name, d in (("sft", sft_dir), ("grpo", grpo_dir)):
        model = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32).eval()
        lp[name] = first_action_logits(model, tok, prompts, batch_size)
        del model
    return compare_first_actions(lp["sft"], lp["grpo"], first, [s["legal"] for s in samples])


def compare_first_actions(
    lp_sft: torch.Tensor, lp_grpo: torch.Tensor, first: list[int], legal: list[list[int]]
) -> dict[str, Any]:
    """Changed choices and KL(GRPO || SFT) from (P, V) first-position log-probabilities of both models;
    `first[a]` is action a's first token, `legal[i]` the legal actions of prompt i."""
    free_changed = int((lp_sft.argmax(-1) != lp_grpo.argmax(-1)).sum())
    kl_full = (lp_grpo.exp() * (lp_grpo - lp_sft)).sum(-1)
    legal_changed, kl_legal = 0, []
    for i, lg in enumerate(legal):
        ids = torch.tensor([first[a] for a in lg])
        a, b = torch.log_softmax(lp_sft[i, ids], -1), torch.log_softmax(lp_grpo[i, ids], -1)
        legal_changed += int(a.argmax() != b.argmax())
        kl_legal.append(float((b.exp() * (b - a)).sum()))
    n = len(legal)
    return dict(
        prompts=n,
        free_first_token_changed=free_changed,
        free_first_token_changed_rate=free_changed / n,
        free_first_token_changed_wilson=wilson(free_changed, n),
        legal_choice_changed=legal_changed,
        legal_choice_changed_rate=legal_changed / n,
        legal_choice_changed_wilson=wilson(legal_changed, n),
        kl_full_first_token_mean=float(kl_full.mean()),
        kl_legal_actions_mean=float(sum(kl_legal) / n),
    )
