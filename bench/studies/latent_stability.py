"""How stable is the latent loop? A 1e-5 relative change of the state the loop starts from, and how far
the thoughts drift apart step by step (relative L2 distance of the fed-back vectors).

A loop whose drift grows ~10x per step (chaotic) hands on thoughts that depend on rounding noise: batch
composition, dtype and kernels change them, so a receiver cannot decode them reliably.

Run: python bench/studies/latent_stability.py --model smollm2-135m-instruct --steps 8
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from latent.args import add_config_arguments, config_from_args, run_script

if TYPE_CHECKING:  # annotations only: --help imports no torch
    from latent import LatentModel

PROMPTS = (
    "Ann's locker code is 47. What is Ann's locker code?",
    "Tom has 23 apples. He buys 4 more. How many apples does he have?",
    "Zoe's bus number is 31. Kate's bus number is 58. What is Kate's bus number?",
)


def drift(model: LatentModel, prompt: str, steps: int, eps: float = 1e-5, seed: int = 0) -> list[float]:
    """Relative distance between the thoughts of the real and of the perturbed start, per step."""
    import torch

    chat = model.tokenizer.chat_template is not None
    enc = model.encode([[{"role": "user", "content": prompt}]] if chat else [prompt], chat=chat)
    with torch.no_grad():
        st = model.prefill(**enc)
        a, _ = model.think(st, steps)
        pert = st.copy()
        g = torch.Generator().manual_seed(seed)
        noise = torch.randn(pert.last_hidden.shape, generator=g).to(pert.last_hidden)
        pert.last_hidden = pert.last_hidden + eps * pert.last_hidden.norm() * noise / noise.norm()
        b, _ = model.think(pert, steps)
    return [float((a[0, i] - b[0, i]).norm() / a[0, i].norm()) for i in range(steps)]


@dataclass
class StabilityBench:
    """Flags of the stability table."""

    model: list[str] = field(metadata={"help": "load_model names or paths, e.g. --model A B"})
    steps: int = field(default=8, metadata={"help": "latent steps per prompt"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def run(args: argparse.Namespace) -> int:
    a = config_from_args(StabilityBench, args)
    import torch

    from latent import load_model

    torch.set_num_threads(a.threads)
    print("| model | prompt | drift after step 1 | step 4 | step 8 | growth per step |")
    print("|---|---|---:|---:|---:|---:|")
    for name in a.model:
        m = load_model(name)
        for i, prompt in enumerate(PROMPTS):
            d = drift(m, prompt, a.steps)
            growth = (d[-1] / max(d[0], 1e-12)) ** (1 / max(len(d) - 1, 1))
            cells = [f"{d[k - 1]:.1e}" if k <= len(d) else "-" for k in (1, 4, 8)]
            print(f"| {name} | {i} | {' | '.join(cells)} | {growth:.2f}x |", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/latent_stability.py",
        __doc__,
        partial(add_config_arguments, cls=StabilityBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
