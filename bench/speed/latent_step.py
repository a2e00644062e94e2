"""Cost of one latent step vs one plain cached single-token forward, and `think` throughput.

    python bench/speed/latent_step.py                      # CPU: a 60M-parameter Llama config, random weights
    python bench/speed/latent_step.py --size 4b --device cuda --dtype bfloat16   # GPU: Qwen3-4B-shaped config
    python bench/speed/latent_step.py --model smollm2-135m-instruct   # a real checkpoint (after models pull)

Speed does not depend on the weights, so random weights are honest here. Both paths run side by side,
interleaved, on the same model and cache length; we report medians.
latent step = realign(last hidden) -> backbone forward of one input embedding (no LM head).
plain step  = `m.forward_tokens(<1 token>, state, in_place=True)` (one cached token through the full causal LM,
              logits included).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: --help imports no torch
    import torch

    from latent import LatentModel

from latent.args import add_config_arguments, config_from_args, run_script

SIZES = {
    # name: (hidden, layers, heads, kv_heads, intermediate, vocab)
    "tiny": (128, 4, 4, 2, 256, 512),
    "60m": (512, 8, 8, 4, 1536, 32000),
    "1b": (2048, 16, 32, 8, 8192, 128256),
    "4b": (2560, 36, 32, 8, 9728, 151936),
}


def build(size: str, device: str, dtype: torch.dtype):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from latent import LatentModel
    from latent.tokenizer import train_chat_tokenizer

    hidden, layers, heads, kv, inter, vocab = SIZES[size]
    cfg = Qwen3Config(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        vocab_size=vocab,
        head_dim=hidden // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    tok = train_chat_tokenizer(["latent thoughts " * 20], vocab_size=300)
    return LatentModel(model.eval(), tok)


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step_ratio(
    m: LatentModel, batch: int, context: int, steps: int, repeats: int, device: str
) -> tuple[float, float, list[float]]:
    """Median seconds per latent step and per plain cached decode step, and each repeat's ratio."""
    import torch

    with torch.no_grad():  # timing only: no autograd graph
        ids = torch.randint(10, min(290, len(m.tokenizer)), (batch, context), device=device)
        st = m.prefill(ids)
        _ = m.aligner  # computed once per model, outside the timed region
        latent_t, plain_t = [], []
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            m.think(st, steps=steps)
            sync(device)
            latent_t.append((time.perf_counter() - t0) / steps)

            plain = st.copy()  # same starting cache length for the plain path
            tok = ids[:, -1:]
            sync(device)
            t0 = time.perf_counter()
            for _ in range(steps):
                logits, plain = m.forward_tokens(tok, plain, in_place=True)
                tok = logits[:, -1:].argmax(-1)
            sync(device)
            plain_t.append((time.perf_counter() - t0) / steps)
        ratios = [lat / plain for lat, plain in zip(latent_t, plain_t)]
        return statistics.median(latent_t), statistics.median(plain_t), ratios


@dataclass
class LatentStepBench:
    """Flags of the latent-step timing."""

    size: str = field(default="60m", metadata={"help": "random-weight model shape", "choices": sorted(SIZES)})
    model: str | None = field(
        default=None, metadata={"help": "a real checkpoint (load_model name or path) instead of --size"}
    )
    device: str = field(default="cpu", metadata={"help": "torch device"})
    dtype: str = field(default="float32", metadata={"help": "torch dtype name"})
    context: int = field(default=256, metadata={"help": "cached positions before the steps"})
    steps: int = field(default=16, metadata={"help": "steps per timing"})
    repeats: int = field(default=5, metadata={"help": "timings per batch size (median reported)"})
    batches: str = field(default="1,4,16", metadata={"help": "comma-separated batch sizes"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(LatentStepBench, ns)
    import torch

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    if args.model:
        from latent import load_model

        m = load_model(args.model, device=args.device, dtype=dtype)
        what = f"{args.model} (real weights"
    else:
        m = build(args.size, args.device, dtype)
        what = f"Qwen3-style {args.size} (random weights"
    n_params = sum(t.numel() for t in m.model.parameters())
    name = (
        torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else f"CPU x{torch.get_num_threads()} threads"
    )
    print(f"model: {what}, {n_params / 1e6:.0f}M params), {args.dtype}, {name}")
    print(f"context {args.context} cached positions, {args.steps} steps per timing, median of {args.repeats}")
    print()
    print(
        f"{'batch':>5} | {'latent step ms':>14} | {'plain step ms':>13} | {'ratio latent/plain':>18} "
        f"| {'ratio min-max':>13} | {'think thoughts/s':>16}"
    )
    print("-" * 98)
    for b in (int(x) for x in args.batches.split(",")):
        lat, plain, ratios = step_ratio(m, b, args.context, args.steps, args.repeats, args.device)
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        print(
            f"{b:>5} | {lat * 1e3:>14.2f} | {plain * 1e3:>13.2f} | {lat / plain:>18.3f} | {spread:>13} "
            f"| {b / lat:>16.1f}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/latent_step.py", __doc__, partial(add_config_arguments, cls=LatentStepBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
