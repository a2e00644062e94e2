"""Completion log-probabilities for GRPO groups, reading each distinct prompt once.

GRPO scores G sampled completions of every prompt. A forward over the [prompt][completion] rows reads
each prompt G times, and for the short completions of a policy that names one action per turn the
prompt is almost all of the row: on SmolLM2 with 70-token prompts, 2-token completions and G = 8,
about 7 of every 8 tokens the model reads are repeats. Here the distinct prompts run once with a KV
cache, the cache rows are repeated for each completion (`index_select`, so gradients reach the
prompt's computation once per completion, as in the full-row forward) and only the completion tokens
run on top. Positions and masks are those of the full-row forward, so both give the same
log-probabilities and gradients up to float rounding (`tests/latent/test_group_scoring.py`).

Shapes: B = rows, U = distinct prompts, P = padded prompt length, C = completion length, V = vocabulary.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import PreTrainedModel

from latent.kv_cache import new_cache, select_rows

# Config fields that rescale or cap the logits before the softmax. TRL's fused head applies them; this
# path does not, so models that set any of them must take the full-row path (`supports_group_scoring`).
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def supports_group_scoring(model: torch.nn.Module) -> bool:
    """True when `model` (a causal LM, possibly PEFT-wrapped) takes a KV cache and applies no logit
    transform of `_LOGIT_TRANSFORMS`, so `completion_logprobs` computes what the full-row forward does."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if text is not config:  # vision-language models: image inputs go through the full-row path
        return False
    return all(getattr(text, name, None) in (None, 1.0) for name in _LOGIT_TRANSFORMS)


def _cache_name(model: torch.nn.Module) -> str:
    """The forward argument (and output field) that carries the KV cache: `cache` from transformers
    5.2x, `past_key_values` before (5.19 ignores `cache=` silently)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def _distinct_rows(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The distinct (ids, mask) rows of a batch, and for each batch row the index of its distinct row."""
    width = ids.shape[1]
    distinct, rows = torch.unique(torch.cat([ids, mask.to(ids.dtype)], dim=1), dim=0, return_inverse=True)
    return distinct[:, :width], distinct[:, width:].to(mask.dtype), rows


def completion_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_length: int,
    temperature: float = 1.0,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (B, C) of the last `completion_length` tokens of each row of `input_ids`
    (B, P + C; prompts left-padded, completions right-padded, as GRPO lays them out), at `temperature`,
    and the entropy of each of those next-token distributions when `compute_entropy`; both are 0 where
    `attention_mask` masks the completion token. Each distinct prompt (its ids and mask) runs once."""
    c = int(completion_length)
    if c < 1 or c >= input_ids.shape[1]:
        raise ValueError(
            f"completion_length {c} must be at least 1 and shorter than the rows ({input_ids.shape[1]} tokens)"
        )
    ids, mask, rows = _distinct_rows(input_ids[:, :-c], attention_mask[:, :-c])
    name = _cache_name(model)
    head = model(
        input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1, **{name: new_cache(model)}
    )
    logits = [head.logits[:, -1:].index_select(0, rows)]  # predicts each row's first completion token
    if c > 1:
        cache = select_rows(getattr(head, name), rows)  # index_select: gradients reach the shared prompt
        tail = model(
            input_ids=input_ids[:, -c:-1],
            attention_mask=attention_mask[:, :-1],
            use_cache=True,
            **{name: cache},
        )
        logits.append(tail.logits)
    logp = torch.log_softmax(torch.cat(logits, dim=1).float() / temperature, dim=-1)
    completion, keep = input_ids[:, -c:], attention_mask[:, -c:].bool()
    token_logp = logp.gather(-1, completion.unsqueeze(-1)).squeeze(-1).masked_fill(~keep, 0.0)
    entropy = None
    if compute_entropy:
        entropy = -(logp.exp() * logp).sum(-1).masked_fill(~keep, 0.0)
    return token_logp, entropy


def prefilled_prompts(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """A KV cache of every row's prompt but its last token (B rows, left-padded), each distinct prompt
    computed once, at the positions `generate` gives them (real tokens counted from 0). `generate` called
    with the full `input_ids` and this cache reads only the last column, then decodes as usual."""
    ids, mask, rows = _distinct_rows(input_ids[:, :-1], attention_mask[:, :-1])
    name = _cache_name(model)
    with torch.no_grad():
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=(mask.long().cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
            **{name: new_cache(model)},
        )
        return select_rows(getattr(out, name), rows)


@contextmanager
def prompts_prefilled_once(model: torch.nn.Module) -> Iterator[None]:
    """Inside the block, `model.generate(input_ids=..., attention_mask=..., ...)` on a left-padded batch
    reads each distinct prompt once (`prefilled_prompts`) instead of once per row; calls it cannot serve
    that way (positional inputs, a cache already given, a right-padded last column) go through as they are.
    Greedy outputs are the same and scores equal up to float rounding (`tests/latent/test_group_scoring.py`)."""
    original, own = model.generate, vars(model).get("generate")
    name = _cache_name(model)

    def generate(*args, input_ids=None, attention_mask=None, **kwargs):
        if (
            not args
            and input_ids is not None
            and attention_mask is not None
            and name not in kwargs
            and input_ids.shape[1] > 1
            and bool(attention_mask[:, -1].all())
        ):
            kwargs[name] = prefilled_prompts(model, input_ids, attention_mask)
        return original(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    model.generate = generate
    try:
        yield
    finally:
        if own is None:
            del model.generate
        else:
            model.generate = own
