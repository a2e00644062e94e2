"""Demo: per-subgrammar KL curves of tiny GPT-2s on a three-subgrammar PCFG, pretraining benefit vs size, CKA.

Run: `python -m families.subgrammar.demo [--quick] [--seeds 2] [--out runs/subgrammar]`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from ..parallel import run_jobs
from .config import SubgrammarConfig
from .data import three_subgrammar_pcfg
from .model import Vocab, build_model, train_and_track


def _ms(vals: list[float], fmt: str = ".3f") -> str:
    a = np.asarray(vals, dtype=float)
    return f"{a.mean():{fmt}} +- {a.std():{fmt}}"


def _bootstrap_ci(values: np.ndarray, reps: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean (seeded, so the table is reproducible)."""
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(reps, len(values)), replace=True).mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _half_time(steps: list[int], curve: list[float]) -> float:
    """First evaluated step at which the curve is at or below half its initial value."""
    for s, v in zip(steps, curve):
        if v <= 0.5 * curve[0]:
            return float(s)
    return float("nan")


@dataclass
class SubgrammarFlags:
    """The subgrammar demo's own flags (next to the shared --quick, --seeds, --out)."""

    train_steps: int = field(default=400, metadata={"help": "steps per run (pretraining gets 3/8 of this)"})
    sizes: str = field(default="1x4,1x8,2x16", metadata={"help": "comma list of LAYERSxWIDTH model sizes"})


SubgrammarDemo = demo_config("subgrammar", SubgrammarFlags, seeds=5, workers=2)


def main(argv: list[str] | None = None) -> int:
    """Print the KL decomposition, curves summary and pretraining table; write results.json into --out."""
    return run_demo(SubgrammarDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    seeds = args.seeds
    try:
        sizes_arg = [tuple(int(v) for v in item.split("x")) for item in args.sizes.split(",") if item.strip()]
    except ValueError:
        raise UsageError(f"--sizes must look like 1x4,2x16 (layers x width), got {args.sizes!r}") from None
    if not sizes_arg or any(len(sz) != 2 or min(sz) < 1 for sz in sizes_arg) or args.train_steps < 8:
        raise UsageError("--sizes needs LAYERSxWIDTH items >= 1 and --train-steps must be >= 8")
    torch.set_num_threads(1)
    t0 = time.time()
    lines: list[str] = []
    emit = lines.append
    g = three_subgrammar_pcfg()
    if args.quick:
        base = SubgrammarConfig(train_steps=30, eval_every=15, num_train=300, num_test=60, pretrain_steps=0)
        sizes, pre = [(1, 8)], 10
    else:
        steps = args.train_steps
        base = SubgrammarConfig(
            train_steps=steps, eval_every=max(1, steps // 8), num_train=5000, num_test=500
        )
        sizes, pre = sizes_arg, (3 * steps) // 8
    coef = g.decomposition_coefficients()
    results: dict = {"coefficients": coef, "runs": {}}

    # exact log-probs: sampler (derivation, unambiguous grammar) vs nltk's inside-chart parser
    check = g.sample_many(20 if args.quick else 100, seed=7, max_len=base.max_position_embeddings - 2)
    err = max(abs(s.logp - g.string_logprob_nltk(s.tokens)) for s in check)
    n_rej = sum(
        g.sample(np.random.default_rng(i), base.max_position_embeddings - 2) is None for i in range(2000)
    )
    results["nltk_max_abs_logp_error"], results["length_rejection_rate"] = err, n_rej / 2000
    emit(
        "\nGrammar: L0 -> S L0 (0.3) | S (0.7); S -> sA A eA | sB B eB | sC C eC (0.3/0.3/0.4). Analytic "
        "c_i = E[#invocations]: " + ", ".join(f"{k}={v:.4f}" for k, v in coef.items())
    )
    emit(
        f"max |log p(sampler) - log p(nltk inside parser)| over {len(check)} strings = {err:.1e}; "
        f"length-cap rejection rate {n_rej / 2000:.4f}"
    )

    emit(
        f"\n## Final KL (nats/string) and decomposition, {seeds} seed(s); pretrain = {pre} steps on standalone "
        "subgrammars, then the rest of the same total budget on the grammar"
    )
    emit(
        "| layers | d | pretrain | total KL | KL_top + sum c_i KL_i (analytic c_i) | KL_A | KL_B | KL_C | CKA(grammar) |"
        " half-time A/B/C (steps) |"
    )
    emit("|---|---|---|---|---|---|---|---|---|---|")
    settings = [(layers, d, use_pre) for layers, d in sizes for use_pre in (False, True)]
    cfgs = {
        (layers, d, use_pre): replace(base, hidden_size=d, num_hidden_layers=layers,
                                      num_attention_heads=2 if d >= 16 else 1, pretrain_steps=pre if use_pre else 0,
                                      train_steps=base.train_steps if use_pre else base.train_steps + pre)
        for layers, d, use_pre in settings
    }  # fmt: skip
    jobs = [(train_and_track, (g, cfgs[key], s)) for key in settings for s in range(seeds)]
    done = run_jobs(jobs, args.workers)  # every run is seeded: the same numbers with any --workers
    finals: dict = {}
    for i, (layers, d, use_pre) in enumerate(settings):
        runs = done[i * seeds : (i + 1) * seeds]
        finals[layers, d, use_pre] = [r.final["total"] for r in runs]
        rec = [r.final["top"] + sum(coef[k] * r.final[f"KL_{k}"] for k in coef) for r in runs]
        half = {k: [_half_time(r.steps, r.curves[f"KL_{k}"]) for r in runs] for k in coef}
        results["runs"][f"{layers}L_d{d}_{'pre' if use_pre else 'scratch'}"] = [
            {"steps": r.steps, "curves": r.curves, "cka": r.cka} for r in runs
        ]
        hs = "/".join("-" if math.isnan(np.mean(v)) else f"{np.mean(v):.0f}" for v in half.values())
        emit(f"| {layers} | {d} | {'yes' if use_pre else 'no'} | {_ms([r.final['total'] for r in runs])} | "
             f"{_ms(rec)} | " + " | ".join(_ms([r.final[f'KL_{k}'] for r in runs]) for k in coef) +
             f" | {_ms([r.cka for r in runs])} | {hs} |")  # fmt: skip

    emit(
        f"\n## Pretraining gain per size: paired by seed (same data, same total steps), {seeds} seed(s); "
        "95% percentile bootstrap interval over seeds"
    )
    emit(
        "| layers | d | parameters | KL scratch | KL pretrained | gain (scratch - pretrained) | 95% CI | seeds with gain > 0 |"
    )
    emit("|---|---|---|---|---|---|---|---|")
    results["pretraining_gain"] = {}
    for layers, d in sizes:
        scratch, pret = np.array(finals[layers, d, False]), np.array(finals[layers, d, True])
        gain = scratch - pret
        lo, hi = _bootstrap_ci(gain)
        n_par = sum(
            p.numel() for p in build_model(cfgs[layers, d, False], len(Vocab(g.terminals()))).parameters()
        )
        results["pretraining_gain"][f"{layers}L_d{d}"] = {
            "gain": gain.tolist(),
            "ci": [lo, hi],
            "params": n_par,
        }
        emit(f"| {layers} | {d} | {n_par} | {_ms(scratch)} | {_ms(pret)} | {gain.mean():+.3f} | "
             f"[{lo:+.3f}, {hi:+.3f}] | {int((gain > 0).sum())}/{len(gain)} |")  # fmt: skip
    path = finish_demo(args, "\n".join(lines), results, time.time() - t0)
    _plot(results, path.parent)
    return 0


def _plot(results: dict, out: Path) -> None:
    """Per-subgrammar KL curves of the first scratch run of every size."""
    from latent.plotting import can_plot, figure, save_figure

    if not can_plot():
        return
    keys = [k for k in results["runs"] if k.endswith("scratch")]
    fig, axes = figure(1, len(keys), figsize=(3.2 * len(keys), 3), squeeze=False, extra="families")
    for ax, k in zip(axes[0], keys):
        r = results["runs"][k][0]
        for name in ("top", "KL_A", "KL_B", "KL_C"):
            ax.semilogy(r["steps"], np.maximum(r["curves"][name], 1e-4), label=name)
        ax.set(title=k, xlabel="step")
    axes[0][0].legend()
    fig.tight_layout()
    save_figure(fig, out / "kl_curves.png", dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
