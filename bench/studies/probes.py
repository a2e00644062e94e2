"""Capture overhead vs a plain forward (goal <= 1.10x), plus steering overhead, next to the same
calls through steering-vectors (a maintained peer library) when it is installed; prints a table.

    python bench/studies/probes.py                      # builtin:arith-mini-v3 if shipped, else a tiny random Llama
    python bench/studies/probes.py --model PATH --batch 16 --repeats 20

Each timed call is one forward of the same left-padded batch (`LatentModel.prefill`; the peer
library's rows run the underlying transformers model with its hooks); calls interleave in a
rotating order so drift in machine load hits all alike. Reported: median ms per call and the median
over rounds of each call's time divided by the plain call of the same round (the goal check).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: --help imports no torch
    import torch

    from latent import LatentModel

# This file is named probes.py: put the repository root first so `import probes` finds the package.
_ROOT = str(Path(__file__).resolve().parents[2])
sys.path = [_ROOT] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402


def _time(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def _peer_calls(m: LatentModel, enc: dict, layers: list[int], vec: torch.Tensor) -> dict:
    """The same capture / steer calls through steering-vectors (empty when it is not installed)."""
    import torch

    try:
        import steering_vectors as sv
    except ImportError:
        print(
            "steering-vectors not installed (pip install --no-deps steering-vectors==0.12.2): peer rows skipped"
        )
        return {}
    pos = (enc["attention_mask"].cumsum(1) - 1).clamp_min(0)
    mid = m.num_layers // 2
    sv_vec = sv.SteeringVector({mid: vec}, layer_type="decoder_block")

    @torch.no_grad()
    def hf_plain() -> None:
        m.model(**enc, position_ids=pos)

    @torch.no_grad()
    def sv_cap_all() -> None:
        with sv.record_activations(m.model, layer_type="decoder_block", layer_nums=layers):
            m.model(**enc, position_ids=pos)

    @torch.no_grad()
    def sv_steer() -> None:
        with sv_vec.apply(m.model, multiplier=0.1):
            m.model(**enc, position_ids=pos)

    return {
        "HF forward (peer baseline)": hf_plain,
        f"sv capture all {m.num_layers}": sv_cap_all,
        "sv steer 1 layer (add)": sv_steer,
    }


@dataclass
class ProbesBench:
    """Flags of the capture/steering overhead table."""

    model: str = field(default="builtin:arith-mini-v3", metadata={"help": "load_model name or path"})
    batch: int = field(default=8, metadata={"help": "prompts in the batch"})
    repeats: int = field(default=12, metadata={"help": "rounds of interleaved calls"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(ProbesBench, ns)
    import torch

    torch.set_num_threads(args.threads)
    from latent import list_builtin_models, load_model
    from latent.testing import tiny_model
    from probes.data import af_scenarios

    if args.model.startswith("builtin:") and not any(b.name == args.model[8:] for b in list_builtin_models()):
        print(f"{args.model} is not shipped yet: using a tiny random Llama (hidden 256, 4 layers)")
        m, name = tiny_model("llama", hidden_size=256, layers=4), "tiny-llama-256x4"
    else:
        m, name = load_model(args.model, device="cpu"), args.model
    items = af_scenarios(n=max(1, args.batch // 12 + 1))[: args.batch]
    texts = [
        m.tokenizer.apply_chat_template(it.messages, tokenize=False, add_generation_prompt=True)
        for it in items
    ]
    enc = m.encode(texts)
    layers = list(range(m.num_layers))
    vec = torch.randn(m.hidden_size)

    def plain() -> None:
        m.prefill(**enc)

    def cap_all() -> None:
        with m.capture(layers):
            m.prefill(**enc)

    def cap_one() -> None:
        with m.capture([m.num_layers // 2]):
            m.prefill(**enc)

    def steer() -> None:
        with m.steer(m.num_layers // 2, vec, alpha=0.1):
            m.prefill(**enc)

    fns = {
        "plain forward": plain,
        "capture 1 layer": cap_one,
        f"capture all {m.num_layers} layers": cap_all,
        "steer 1 layer (add)": steer,
    }
    fns.update(_peer_calls(m, enc, layers, vec))
    for fn in fns.values():  # warm-up
        fn()
    times = {k: [] for k in fns}
    order = list(fns)
    for r in range(args.repeats):
        for k in order[r % len(order) :] + order[: r % len(order)]:  # rotate so no call always runs first
            times[k] += _time(fns[k], 1)
    base = statistics.median(times["plain forward"])
    print(
        f"model {name}: batch {enc['input_ids'].shape[0]} x {enc['input_ids'].shape[1]} tokens, {args.threads} thread(s), {args.repeats} rounds"
    )
    print(f"{'call':<28}{'median ms':>12}{'paired ratio (median)':>24}")
    ratios = {}
    for k, v in times.items():
        # ratio to the plain call of the same round (adjacent in time, so load swings mostly cancel); the
        # peer library's rows are divided by the plain transformers forward they hook into
        ref = times["HF forward (peer baseline)"] if k.startswith("sv ") else times["plain forward"]
        ratios[k] = statistics.median(a / b for a, b in zip(v, ref))
        print(f"{k:<28}{statistics.median(v):>12.1f}{ratios[k]:>23.3f}x")
    ratio = ratios[f"capture all {m.num_layers} layers"]
    print(
        f"capture overhead goal <= 1.10x: {'met' if ratio <= 1.10 else 'NOT met'} ({ratio:.3f}x, plain median {base:.1f} ms)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/probes.py", __doc__, partial(add_config_arguments, cls=ProbesBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
