"""Baselines at the same size: a left-to-right AR GPT and encoder-only masked diffusion models (MDMs).

`AutoregressiveWrapper` (x-transformers) is the AR baseline. The encoder MDM is x-transformers'
bidirectional `Encoder` inside `NonAutoregressiveWrapper`, trained here with the MDM ELBO (`mdm_loss`,
masked cross-entropy weighted by 1/t) and sampled by `mdm_sample` (random reveal order, tokens drawn
from the model's conditionals at temperature T, like AO-GPT's sampler). The wrapper's own MaskGIT-style
`generate` reveals the most confident tokens first, which gives degenerate, repetitive text; it is not
used. `encoder_logits_same_network` runs AO-GPT's own blocks as a bidirectional encoder, so decoding
time can be compared with the same network code.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .config import AOGPTConfig


def _attn_kwargs(cfg: AOGPTConfig) -> dict:
    # dim_head = d / heads keeps the parameter count equal to AO-GPT's attention
    return {"dim": cfg.hidden_size, "depth": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
            "attn_dim_head": cfg.hidden_size // cfg.num_attention_heads}  # fmt: skip


def ar_baseline(cfg: AOGPTConfig):
    """x-transformers AutoregressiveWrapper(TransformerWrapper(Decoder)); `wrapper(x)` is the mean NLL."""
    from x_transformers import AutoregressiveWrapper, Decoder, TransformerWrapper

    net = TransformerWrapper(
        num_tokens=cfg.vocab_size, max_seq_len=cfg.block_size, attn_layers=Decoder(**_attn_kwargs(cfg))
    )
    return AutoregressiveWrapper(net)


def mdm_baseline(cfg: AOGPTConfig, steps: int = 32):
    """x-transformers NonAutoregressiveWrapper over a bidirectional Encoder; mask id = vocab_size.

    `use_simple_mdlm_loss_weight=False` keeps the plain masked cross-entropy (the weighted variant returned
    negative losses in our check); likelihoods are measured by `mdm_elbo_bits` instead.
    """
    from x_transformers import Encoder, NonAutoregressiveWrapper, TransformerWrapper

    net = TransformerWrapper(num_tokens=cfg.vocab_size + 1, max_seq_len=cfg.block_size,
                             attn_layers=Encoder(**_attn_kwargs(cfg)))  # fmt: skip
    return NonAutoregressiveWrapper(
        net, mask_id=cfg.vocab_size, steps=steps, use_simple_mdlm_loss_weight=False
    )


def _masked_nll(
    wrapper, x: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draw of the linear-schedule MDM ELBO integrand: per-sequence sum over masked tokens of
    -log p(x_i | x_obs), divided by t, for t ~ U(0, 1]. Returns (B,) values and the (B, T) mask."""
    b, t = x.shape
    tt = torch.rand(b, 1, generator=generator).clamp(min=1e-3)
    mask = torch.rand(b, t, generator=generator) < tt
    inp = x.masked_fill(mask, wrapper.mask_id)
    nll = F.cross_entropy(wrapper.net(inp)[..., : wrapper.mask_id].transpose(1, 2), x, reduction="none")
    return (nll * mask).sum(1) / tt[:, 0], mask


def mdm_loss(wrapper, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """MDM training loss = the negative ELBO in nats per token (1/t-weighted masked cross-entropy)."""
    values, _ = _masked_nll(wrapper, x, generator)
    return values.mean() / x.shape[1]


@torch.no_grad()
def mdm_sample(logits_fn, n: int, length: int, mask_id: int, steps: int, temperature: float = 1.0,
               generator: torch.Generator | None = None) -> torch.Tensor:  # fmt: skip
    """Ancestral MDM sampling: a uniformly random reveal order, length/steps positions per step (linear
    schedule, as AO-GPT's sampler); each step re-encodes the whole sequence with `logits_fn` (B, L) ->
    (B, L, >= mask_id) and draws the new positions from softmax(logits / temperature)."""
    if not 1 <= steps <= length:
        raise ValueError(f"`steps` must be in [1, {length}], got {steps}.")
    if not temperature > 0:
        raise ValueError(f"`temperature` must be > 0, got {temperature}.")
    x = torch.full((n, length), mask_id, dtype=torch.long)
    order = torch.rand(n, length, generator=generator).argsort(1)
    done = 0
    for k in (len(c) for c in torch.arange(length).chunk(steps)):
        pos = order[:, done : done + k]  # (n, k)
        logits = logits_fn(x)[..., :mask_id].gather(1, pos[..., None].expand(-1, -1, mask_id))  # (n, k, V)
        probs = torch.softmax(logits / temperature, -1)
        tok = torch.multinomial(probs.reshape(-1, mask_id), 1, generator=generator).view(n, k)
        x.scatter_(1, pos, tok)
        done += k
    return x


def encoder_logits_same_network(model: torch.nn.Module):
    """`logits_fn` for `mdm_sample` that runs AO-GPT's blocks bidirectionally over all L positions (the
    [None] id marks masked ones): an encoder MDM with the same network code, for timing only."""

    def logits_fn(x: torch.Tensor) -> torch.Tensor:
        n, length = x.shape
        pos = torch.arange(length).expand(n, length)
        full = torch.ones(length, length, dtype=torch.bool)
        return model.run(x, pos + 1, pos, full)[0]

    return logits_fn


@torch.no_grad()
def ar_token_nll(wrapper, x: torch.Tensor) -> torch.Tensor:
    """Per-token NLL (B, T-1) of x[:, 1:] given the prefix under the AR baseline."""
    logits = wrapper.net(x[:, :-1])
    return F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")


@torch.no_grad()
def mdm_elbo_bits(wrapper, x: torch.Tensor, n_t: int = 8, generator: torch.Generator | None = None) -> float:
    """Masked-diffusion ELBO in bits per token, linear schedule: E_t[(1/t) sum_masked -log p(x_i | x_obs)] / T."""
    total = sum(_masked_nll(wrapper, x, generator)[0] for _ in range(n_t))
    return float(total.mean() / n_t / x.shape[1]) / math.log(2)
