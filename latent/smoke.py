"""`latentworks smoke`: a one-minute check that the hidden-state interface works on a model."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field


@dataclass
class SmokeConfig:
    """What the smoke check runs on."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "path, hub id or builtin:<name>"})
    steps: int = field(default=4, metadata={"help": "latent steps"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})

    def __post_init__(self) -> None:
        if self.steps < 1 or self.threads < 1:
            raise ValueError(f"`steps` and `threads` must be >= 1, got {self.steps} and {self.threads}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latent.args import add_config_arguments

    add_config_arguments(parser, SmokeConfig, files=False)


def run(args: argparse.Namespace) -> int:
    import torch

    from latent import list_builtin_models, load_model
    from latent.args import config_from_args
    from latent.testing import tiny_model

    args = config_from_args(SmokeConfig, args)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if args.model.startswith("builtin:") and not list_builtin_models():
        print("no built-in model shipped yet: using a tiny random Llama for the smoke check")
        m = tiny_model("llama")
    else:
        m = load_model(args.model)
    batch = m.encode(["What is 12 + 30?", "Tom has 3 apples and buys 4 more. How many apples?"], chat=True)
    st = m.prefill(**batch)
    thoughts, st = m.think(st, steps=args.steps)
    with m.capture(layers=[0]) as acts:
        out = m.generate(**m.encode(["Answer:", "Answer:"]), state=st, max_new_tokens=24)
    print(f"model: {args.model}  layers={m.num_layers} hidden={m.hidden_size}")
    print(
        f"prefill+think: state length {st.length}, KV {st.nbytes / 1024:.1f} KiB, thoughts {tuple(thoughts.shape)}"
    )
    print(f"captured layer 0 over {acts.stacked(0).shape[1]} positions")
    for text in out.texts:
        print("->", text.strip().replace("\n", " ")[:120])
    print(f"ok in {time.perf_counter() - t0:.1f}s")
    return 0
