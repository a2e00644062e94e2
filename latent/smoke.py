"""`latentworks smoke`: a one-minute check that the hidden-state interface works on a model."""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="builtin:arith-mini", help="path, hub id or builtin:<name>")
    parser.add_argument("--steps", type=int, default=4, help="latent steps")


def run(args: argparse.Namespace) -> int:
    from latent import list_builtin_models, load_model
    from latent.testing import tiny_model

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
