"""Tiny random causal LMs for tests and examples: a config + a tokenizer trained locally, no hub.

`tiny_model("llama", tmp_path)` saves the pair with `save_pretrained` and reloads it through
`load_model`, so the real loading path is what every test exercises.
"""

from __future__ import annotations

from pathlib import Path

import torch

from latent.loading import load_model
from latent.model import LatentModel
from latent.tokenizer import train_chat_tokenizer

_CORPUS = [
    "Tom has 23 apples. He buys 45 more. How many apples does Tom have now?",
    "The planner reads the question and writes a plan. The critic checks the plan.",
    "A refiner improves the answer; the judger decides the final answer in \\boxed{68}.",
    "Mia had 12 pencils and gave 5 to Leo. Then she found 7 more pencils in her bag.",
    "def add(a, b):\n    return a + b\n",
    "The quick brown fox jumps over the lazy dog while the science expert explains gravity.",
]

ARCHS = ("llama", "qwen2", "mistral", "gpt2", "gemma3")


def tiny_config(arch: str, vocab_size: int, hidden_size: int = 64, layers: int = 2):
    """A small config of the given architecture family."""
    from transformers import GPT2Config, LlamaConfig, MistralConfig, Qwen2Config

    common = dict(vocab_size=vocab_size, tie_word_embeddings=False)
    if arch == "gpt2":
        return GPT2Config(n_embd=hidden_size, n_layer=layers, n_head=4, n_positions=2048, **common)
    if arch == "gemma3":
        # Gemma 3 details that matter for latent thoughts: embeddings scaled by sqrt(D) inside the
        # embedding module, tied embeddings, and sliding-window layers (a short window, so tests cross it).
        from transformers import Gemma3TextConfig

        return Gemma3TextConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=hidden_size * 2,
            num_hidden_layers=max(layers, 2),
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=hidden_size // 4,
            max_position_embeddings=2048,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"] * (max(layers, 2) // 2)
            + ["sliding_attention"] * (max(layers, 2) % 2),
            tie_word_embeddings=True,
        )
    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}.get(arch)
    if cls is None:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose from {ARCHS}.")
    return cls(
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        **common,
    )


def tiny_model(
    arch: str = "llama",
    directory: str | Path | None = None,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int = 320,
) -> LatentModel:
    """Build, save and reload a tiny random model of `arch` with a locally trained tokenizer (another
    `vocab_size` trains another tokenizer: a second model family in miniature)."""
    from transformers import AutoModelForCausalLM

    if directory is None:
        import tempfile

        directory = tempfile.mkdtemp(prefix=f"tiny-{arch}-")
    directory = Path(directory)
    tok = train_chat_tokenizer(_CORPUS * 4, vocab_size=vocab_size)
    torch.manual_seed(seed)
    cfg = tiny_config(arch, vocab_size=len(tok), hidden_size=hidden_size, layers=layers)
    cfg.pad_token_id = tok.pad_token_id
    cfg.eos_token_id = tok.eos_token_id
    cfg.bos_token_id = None
    model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return load_model(str(directory), device="cpu", attn_implementation="eager")


def tiny_pair(directory: str | Path) -> tuple[LatentModel, LatentModel]:
    """Two tiny models that cannot read each other's cache: a llama sender (width 64, a 320-entry
    tokenizer) and a qwen2 receiver (width 48, a 288-entry tokenizer), saved under `directory`/sender and
    `directory`/receiver (a hand-off across two models in miniature)."""
    directory = Path(directory)
    sender = tiny_model("llama", directory / "sender", hidden_size=64)
    receiver = tiny_model("qwen2", directory / "receiver", seed=1, hidden_size=48, vocab_size=288)
    return sender, receiver


# A Qwen3-style template in miniature: ChatML, and with `enable_thinking=False` an empty thinking block
# after the generation prompt (Qwen3 thinks when the switch is left out).
THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    "{% endif %}"
)


def tiny_tokenizer():
    """The tiny models' tokenizer: a 320-entry ChatML BPE trained here on a few sentences (no hub)."""
    return train_chat_tokenizer(_CORPUS * 4, vocab_size=320)


def tiny_thinking_model(seed: int = 0) -> LatentModel:
    """A tiny random Qwen2-shaped model whose tokenizer has `<think>`/`</think>` tokens and a Qwen3-style
    template with the `enable_thinking` switch (in memory, not saved)."""
    from transformers import AutoModelForCausalLM

    tok = tiny_tokenizer()
    tok.add_tokens(["<think>", "</think>"])  # plain added tokens, as in Qwen3 (kept when decoding)
    tok.chat_template = THINKING_TEMPLATE
    torch.manual_seed(seed)
    cfg = tiny_config("qwen2", vocab_size=len(tok))
    cfg.pad_token_id, cfg.eos_token_id, cfg.bos_token_id = tok.pad_token_id, tok.eos_token_id, None
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return LatentModel(model, tok)
