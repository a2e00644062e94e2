"""Demo: AO-GPT vs AR GPT vs encoder-only MDM on stdlib characters: bits/char, decoding speed, sample NLL.

Run: `python -m families.aogpt.demo [--quick] [--seeds 2] [--out runs/aogpt]`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import (
    ar_baseline,
    ar_token_nll,
    encoder_logits_same_network,
    mdm_baseline,
    mdm_elbo_bits,
    mdm_loss,
    mdm_sample,
)
from .config import AOGPTConfig
from .data import batches, encode, load_corpus, split
from .model import AOGPT

LN2 = math.log(2)


def _train(
    model: torch.nn.Module, loss_fn, train: torch.Tensor, cfg: AOGPTConfig, steps: int, seed: int
) -> float:
    """AdamW (lr 3e-3, wd 0.05, betas (0.9, 0.95)) on random windows; returns wall seconds."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / steps))
    t0 = time.time()
    model.train()
    for _ in range(steps):
        loss = loss_fn(batches(train, cfg.block_size, 32, g), g)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    model.eval()
    return time.time() - t0


def _ms(v: list[float], fmt: str = ".3f") -> str:
    a = np.asarray(v, dtype=float)
    return f"{a.mean():{fmt}} +- {a.std():{fmt}}"


@dataclass
class AogptFlags:
    """The aogpt demo's own flags (next to the shared --quick, --seeds, --out)."""

    steps: int | None = field(
        default=None, metadata={"help": "training steps per model (default 300, quick 5)"}
    )


AogptDemo = demo_config("aogpt", AogptFlags, seeds=2)


def main(argv: list[str] | None = None) -> int:
    """Print the three tables and write results.json into --out."""
    return run_demo(AogptDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    seeds = args.seeds
    steps = args.steps if args.steps is not None else (5 if args.quick else 300)
    if steps < 1:
        raise UsageError("--steps must be >= 1")
    torch.set_num_threads(1)
    t_start = time.time()
    cfg = AOGPTConfig(block_size=32) if args.quick else AOGPTConfig()
    train, test = split(encode(load_corpus()))
    n_test = 8 if args.quick else 64
    test_x = batches(test, cfg.block_size, n_test, torch.Generator().manual_seed(123))
    step_grid = [s for s in (8, 32, 128) if s <= cfg.block_size]
    temps = (1.0, 0.8)
    rows: dict[str, list] = {}
    for seed in range(seeds):
        torch.manual_seed(seed)
        ar = ar_baseline(cfg)
        ar_t = _train(ar, lambda x, g, m=ar: m(x), train, cfg, steps, seed)
        mdm = mdm_baseline(cfg)
        mdm_t = _train(mdm, lambda x, g, m=mdm: mdm_loss(m, x, g), train, cfg, steps, seed)  # the ELBO
        ao = {
            name: AOGPT(replace(cfg, random_ratio=r))
            for name, r in (("AO-GPT (uniform)", 1.0), ("AO-GPT-CL (0.9)", 0.9))
        }
        ao_t = {n: _train(m, lambda x, g, m=m: m.loss(x, g), train, cfg, steps, seed) for n, m in ao.items()}
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            ar_bpc = float(ar_token_nll(ar, test_x).mean()) / LN2
            rows.setdefault("AR GPT (x-transformers)", []).append(
                {"l2r": ar_bpc, "rand": float("nan"), "train_s": ar_t}
            )
            rows.setdefault("encoder MDM (x-transformers, ELBO-trained)", []).append(
                {"l2r": float("nan"), "rand": mdm_elbo_bits(mdm, test_x, generator=g), "train_s": mdm_t}
            )
            for n, m in ao.items():
                l2r = float(m(test_x)[:, 1:].mean()) / LN2  # same tokens as the AR row (x_1..x_{T-1})
                orders = [torch.rand(n_test, cfg.block_size, generator=g).argsort(1) for _ in range(4)]
                rand = np.mean([float(m(test_x, o).mean()) for o in orders]) / LN2  # joint NLL / T
                rows.setdefault(n, []).append({"l2r": l2r, "rand": rand, "train_s": ao_t[n]})
            # decoding speed: AO-GPT (KV cache, parallel blocks) vs encoder MDM re-encoding every step
            aocl = ao["AO-GPT-CL (0.9)"]
            for s in step_grid:
                t0 = time.time()
                aocl.sample(8, s, generator=g)
                t_ao = time.time() - t0
                t0 = time.time()
                aocl.sample(8, s, generator=g, use_cache=False)
                t_nc = time.time() - t0
                t0 = time.time()
                mdm_sample(mdm.net, 8, cfg.block_size, mdm.mask_id, s, generator=g)
                t_mdm = time.time() - t0
                t0 = time.time()  # the same blocks as AO-GPT, run bidirectionally over all positions
                mdm_sample(encoder_logits_same_network(aocl), 8, cfg.block_size, aocl.none_id, s, generator=g)
                t_same = time.time() - t0
                rows.setdefault(f"speed S={s}", []).append(
                    {"ao": t_ao, "ao_nocache": t_nc, "mdm": t_mdm, "same_net": t_same}
                )
            # NLL of samples under the AR model (bits/char), S=32 (or T) parallel steps
            s = min(32, cfg.block_size)
            for temp in temps:
                order = torch.rand(16, cfg.block_size, generator=g).argsort(1)
                xs = aocl.sample(16, s, order=order, temperature=temp, generator=g)
                xm = mdm_sample(mdm.net, 16, cfg.block_size, mdm.mask_id, s, temperature=temp, generator=g)
                rows.setdefault(f"gen T={temp}", []).append({
                    "ao": float(ar_token_nll(ar, xs).mean()) / LN2, "mdm": float(ar_token_nll(ar, xm).mean()) / LN2,
                    "data": ar_bpc,
                })  # fmt: skip
    lines: list[str] = []
    emit = lines.append
    emit(
        f"\n## Test bits per character (stdlib sources, T={cfg.block_size}, d={cfg.hidden_size}, "
        f"{cfg.num_hidden_layers} layers, {steps} steps x batch 32, {seeds} seed(s))"
    )
    emit("| model | L2R bits/char | random-order bits/char (4 orders) / MDM ELBO | train s |")
    emit("|---|---|---|---|")
    for n in (
        "AR GPT (x-transformers)",
        "AO-GPT (uniform)",
        "AO-GPT-CL (0.9)",
        "encoder MDM (x-transformers, ELBO-trained)",
    ):
        r = rows[n]
        l2r = "-" if math.isnan(r[0]["l2r"]) else _ms([x["l2r"] for x in r])
        rnd = "-" if math.isnan(r[0]["rand"]) else _ms([x["rand"] for x in r])
        emit(f"| {n} | {l2r} | {rnd} | {np.mean([x['train_s'] for x in r]):.0f} |")
    emit("\n## Generation time for 8 sequences (s) vs parallel steps S")
    emit(
        "| S | AO-GPT-CL (KV cache) | AO-GPT-CL (no cache) | encoder MDM, same network | same network / AO-GPT "
        "| encoder MDM (x-transformers) | x-transformers / AO-GPT |"
    )
    emit("|---|---|---|---|---|---|---|")
    for s in step_grid:
        r = rows[f"speed S={s}"]
        ratio = [x["mdm"] / x["ao"] for x in r]
        same = [x["same_net"] / x["ao"] for x in r]
        emit(
            f"| {s} | {_ms([x['ao'] for x in r])} | {_ms([x['ao_nocache'] for x in r])} | "
            f"{_ms([x['same_net'] for x in r])} | {_ms(same, '.1f')} | "
            f"{_ms([x['mdm'] for x in r])} | {_ms(ratio, '.1f')} |"
        )
    emit(
        f"\n## NLL of 16 samples under the AR model (bits/char), S={min(32, cfg.block_size)} parallel steps; "
        f"test data scores {_ms([x['l2r'] for x in rows['AR GPT (x-transformers)']])}"
    )
    emit("| temperature | AO-GPT-CL samples | encoder MDM samples |")
    emit("|---|---|---|")
    for temp in temps:
        r = rows[f"gen T={temp}"]
        emit(f"| {temp} | {_ms([x['ao'] for x in r])} | {_ms([x['mdm'] for x in r])} |")
    payload = {"config": cfg.__dict__, "steps": steps, "rows": rows}
    finish_demo(args, "\n".join(lines), payload, time.time() - t_start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
