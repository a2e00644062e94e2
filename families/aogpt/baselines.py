"""Baselines from x-transformers at the same size: a left-to-right AR GPT and an encoder-only masked model.

`AutoregressiveWrapper` is the AR baseline; `NonAutoregressiveWrapper` (MaskGIT-style, bidirectional
encoder that re-encodes the whole sequence at every decoding step) is the encoder-only MDM baseline.
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


@torch.no_grad()
def ar_token_nll(wrapper, x: torch.Tensor) -> torch.Tensor:
    """Per-token NLL (B, T-1) of x[:, 1:] given the prefix under the AR baseline."""
    logits = wrapper.net(x[:, :-1])
    return F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")


@torch.no_grad()
def mdm_elbo_bits(wrapper, x: torch.Tensor, n_t: int = 8, generator: torch.Generator | None = None) -> float:
    """Masked-diffusion ELBO in bits per token, linear schedule: E_t[(1/t) sum_masked -log p(x_i | x_obs)] / T."""
    b, t = x.shape
    total = torch.zeros(b)
    for _ in range(n_t):
        tt = torch.rand(b, 1, generator=generator).clamp(min=1e-3)
        mask = torch.rand(b, t, generator=generator) < tt
        inp = x.masked_fill(mask, wrapper.mask_id)
        nll = F.cross_entropy(wrapper.net(inp)[..., : wrapper.mask_id].transpose(1, 2), x, reduction="none")
        total += (nll * mask).sum(1) / tt[:, 0]
    return float(total.mean() / n_t / t) / math.log(2)
