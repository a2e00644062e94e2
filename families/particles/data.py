"""Inputs for the particles family: random initial clouds and tiny random Hugging Face decoders built in code."""

from __future__ import annotations

import torch

from .model import sample_sphere


def initial_clouds(n_clouds: int, n: int, dim: int, seed: int = 0) -> list[torch.Tensor]:
    """`n_clouds` independent uniform clouds of n points on S^{dim-1}, reproducible from `seed`."""
    if n_clouds < 1:
        raise ValueError(f"`n_clouds` must be >= 1, got {n_clouds}.")
    return [sample_sphere(n, dim, torch.Generator().manual_seed(seed * 1000 + i)) for i in range(n_clouds)]


def tiny_hf_model(
    kind: str = "llama", hidden_size: int = 16, init_range: float = 0.02, seed: int = 0
) -> torch.nn.Module:
    """A random 2-layer Llama or GPT-2 causal LM (no download); `init_range` is the weight std at init.

    HF's default `initializer_range=0.02` gives near-identity blocks; larger values mimic the larger
    effective weights of trained blocks, which is where clustering shows up.
    """
    if kind not in ("llama", "gpt2"):
        raise ValueError(f"`kind` must be 'llama' or 'gpt2', got {kind!r}.")
    if hidden_size < 4 or hidden_size % 4:
        raise ValueError(f"`hidden_size` must be a positive multiple of 4 (4 heads), got {hidden_size}.")
    if not init_range > 0:
        raise ValueError(f"`init_range` must be > 0, got {init_range}.")
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    if kind == "llama":
        cfg = LlamaConfig(
            hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=64, initializer_range=init_range,
        )  # fmt: skip
        return LlamaForCausalLM(cfg).eval()
    cfg = GPT2Config(
        n_embd=hidden_size, n_layer=2, n_head=4, vocab_size=64, initializer_range=init_range,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return GPT2LMHeadModel(cfg).eval()
