"""MemExplainer demo: find a planted trigger event that only the TGN's memory remembers.

Run: `python -m families.memexplainer.demo [--quick] [--seeds 3] [--task flag|dormancy] [--out runs/memexplainer]`.
Per seed: train a TGN on synthetic streams, explain held-out streams, and report
(1) conservation |sum of terms - logit|, (2) recall@k of the trigger on true positives,
(3) KL(p || p_S) and |p - p_S| after replaying the model on only the k selected events, k = 1..5,
for MemExplainer (KL-optimal and naive top-k selection, with and without the memory tree) and the
baselines (gradient x input, captum integrated gradients, attention weights, random).
"""

from __future__ import annotations

import contextlib
import copy
import io
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import attention_scores, grad_x_input, integrated_gradients, random_scores, topk_events
from .config import MemExplainerConfig
from .data import EventStreams, make_streams
from .explain import NON_EVENT_TERMS, bernoulli_kl_logits, choose_events, explain_streams
from .model import accuracy, train_tgn

METHODS = (
    "MemExplainer (KL)",
    "MemExplainer (KL, no b)",
    "MemExplainer (relaxed)",
    "MemExplainer (top-k)",
    "no memory tree (KL)",
    "grad x input",
    "IG (captum)",
    "attention",
    "random",
)
KS = (1, 2, 3, 4, 5)
KL = dict(selection="kl", include_bias=True)


def _select_all(
    cfg: MemExplainerConfig, scores: dict, z: np.ndarray, length: int, rng: np.random.Generator
) -> tuple[dict, dict]:
    """method -> (len(KS), B, T) bool keep masks, and the mean objective value of the MemExplainer rows.

    The objective ("surrogate KL") is KL(Bern(sigmoid(z)) || Bern(sigmoid(b + sum_S c))), i.e. what the
    selection optimises assuming the contributions stay additive when the other events are removed.
    """
    masks = {}
    surrogate = {m: np.zeros((len(KS), len(z))) for m in METHODS if scores[m][0] != "score"}
    for method in METHODS:
        kind, data = scores[method]
        keep = np.zeros((len(KS), len(z), length), dtype=bool)
        for ki, k in enumerate(KS):
            for b in range(len(z)):
                if kind == "score":  # baselines; signed ones are ranked towards the predicted class
                    signed = method in ("grad x input", "IG (captum)")
                    idx = topk_events(data[b], k, rng, float(z[b]) if signed else None)
                else:  # MemExplainer contributions with the row's selection rule
                    e, row_cfg = data[b], replace(cfg, **kind)
                    idx = choose_events(e, k, row_cfg, rng)
                    base = e.non_event if row_cfg.include_bias else 0.0
                    surrogate[method][ki, b] = bernoulli_kl_logits(
                        e.logit, base + e.events.numpy()[idx].sum()
                    )
                keep[ki, b, idx] = True
        masks[method] = keep
    return masks, {m: v.mean(1).tolist() for m, v in surrogate.items()}


def run_seed(seed: int, args: Any) -> dict:
    """Train, explain and evaluate one seed; returns plain numbers."""
    cfg = MemExplainerConfig(seed=seed, train_steps=args.train_steps, task=args.task)
    t0 = time.time()
    train = make_streams(args.train_streams, cfg, 1000 * seed)
    test = make_streams(args.explain, cfg, 1000 * seed + 1)
    model = train_tgn(cfg, train)
    t_train = time.time() - t0
    acc = accuracy(model, test)
    m64 = copy.deepcopy(model).double().eval()  # explain and replay in float64
    with torch.no_grad():
        z = m64(test).numpy()
    t1 = time.time()
    full = explain_streams(m64, test, None)
    t_expl = (time.time() - t1) / len(test)
    topo = explain_streams(m64, test, 0)
    cons = max(abs(e.total - zz) for ex in (full, topo) for e, zz in zip(ex, z, strict=True))
    rng = np.random.default_rng(seed)
    scores = {
        "MemExplainer (KL)": (KL, full),
        "MemExplainer (KL, no b)": (dict(selection="kl", include_bias=False), full),  # paper's objective
        # the reference code's convex relaxation with its objective (no b), then the k largest x
        "MemExplainer (relaxed)": (dict(selection="relaxed", include_bias=False), full),
        "MemExplainer (top-k)": (dict(selection="topk"), full),
        "no memory tree (KL)": (KL, topo),
        "grad x input": ("score", grad_x_input(m64, test).numpy()),
        "IG (captum)": ("score", integrated_gradients(m64, test, n_steps=args.ig_steps).numpy()),
        "attention": ("score", attention_scores(m64, test).numpy()),
        "random": ("score", random_scores(test, rng).numpy()),
    }
    masks, surrogate = _select_all(cfg, scores, z, test.stream_length, rng)
    # replay the model on only the selected events of every (method, k, stream) in one batch
    stacked = np.concatenate([masks[m].reshape(-1, test.stream_length) for m in METHODS])
    reps = len(METHODS) * len(KS)
    big = EventStreams(
        test.src.repeat(reps, 1), test.dst.repeat(reps, 1), test.msg.repeat(reps, 1, 1),
        test.label.repeat(reps), test.trigger_step.repeat(reps), test.num_nodes,
    )  # fmt: skip
    with torch.no_grad():
        z_sel = m64(big, torch.from_numpy(stacked)).numpy().reshape(len(METHODS), len(KS), -1)
    sig = 1 / (1 + np.exp(-z))
    tp = (test.label.numpy() == 1) & (z > 0)
    trig = test.trigger_step.numpy()
    res = {
        "accuracy": acc,
        "conservation_max_abs": cons,
        "train_s": t_train,
        "explain_ms_per_stream": 1e3 * t_expl,
    }
    res["n_true_positive"] = int(tp.sum())
    for name, ex in (("full tree", full), ("topology only", topo)):  # the terms that are not events
        res[f"non_event[{name}]"] = {t: float(np.mean([getattr(e, t) for e in ex])) for t in NON_EVENT_TERMS}
        res[f"non_event[{name}]"]["events"] = float(np.mean([e.events.sum().item() for e in ex]))
    for mi, method in enumerate(METHODS):
        hit = masks[method][:, tp, :][:, np.arange(tp.sum()), trig[tp]]  # (K, TP)
        res[method] = {
            "recall": hit.mean(1).tolist() if tp.any() else [float("nan")] * len(KS),
            "kl": bernoulli_kl_logits(z, z_sel[mi]).mean(1).tolist(),
            "dp": np.abs(sig - 1 / (1 + np.exp(-z_sel[mi]))).mean(1).tolist(),
        }
    res["surrogate_kl"] = surrogate
    res["depth_recall@1"] = {}
    for depth in args.depths:
        if not tp.any():
            res["depth_recall@1"][str(depth)] = float("nan")
            continue
        sub = test.subset(torch.from_numpy(tp))
        ex = full if depth is None else topo if depth == 0 else explain_streams(m64, sub, depth)
        ex = [ex[i] for i in np.flatnonzero(tp)] if depth in (None, 0) else ex
        hits = [trig[tp][j] in choose_events(e, 1, replace(cfg, **KL), rng) for j, e in enumerate(ex)]
        res["depth_recall@1"][str(depth)] = float(np.mean(hits))
    return res


def _fmt(vals: list[float], digits: int = 3) -> str:
    a = np.asarray(vals, dtype=float)
    if np.isnan(a).all():  # e.g. no true positive among a tiny --quick test set
        return "n/a"
    return f"{np.nanmean(a):.{digits}f} +- {np.nanstd(a):.{digits}f}"


def _print_table(runs: list[dict], key: str, title: str, digits: int = 3) -> None:
    print(f"\n{title}")
    header = f"{'method':<24}" + "".join(f"{'k=' + str(k):>17}" for k in KS)
    print(header)
    print("-" * len(header))
    for method in METHODS:
        cells = [_fmt([r[method][key][i] for r in runs], digits) for i in range(len(KS))]
        print(f"{method:<24}" + "".join(f"{c:>17}" for c in cells))


@dataclass
class MemexplainerFlags:
    """The memexplainer demo's own flags (next to the shared --quick, --seeds, --out)."""

    train_steps: int | None = field(default=None, metadata={"help": "override the Adam steps"})
    explain: int | None = field(default=None, metadata={"help": "number of held-out streams to explain"})
    task: str = field(
        default="flag",
        metadata={
            "help": "'flag': a flagged query-node event; 'dormancy': the event that ends a long silence (timing only)"
        },
    )


MemexplainerDemo = demo_config("memexplainer", MemexplainerFlags, seeds=3, quick_seeds=1)


def main(argv: list[str] | None = None) -> int:
    """Run the demo and print recall / fidelity tables (mean +- std over seeds)."""
    return run_demo(MemexplainerDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    torch.set_num_threads(1)  # the demo machine is a shared 2-core box
    args.train_steps = args.train_steps or (40 if args.quick else 300)
    args.explain = args.explain or (16 if args.quick else 200)
    if args.train_steps < 1 or args.explain < 2:
        raise UsageError("--train-steps must be >= 1 and --explain >= 2")
    args.train_streams = 256 if args.quick else 1024
    args.ig_steps = 8 if args.quick else 32
    args.depths = [0, 4, None] if args.quick else [0, 1, 2, 4, 6, 8, 12, None]
    t0 = time.time()
    runs = [run_seed(seed, args) for seed in range(args.seeds)]
    wall = time.time() - t0
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        print(
            f"task={args.task} seeds={args.seeds} train_steps={args.train_steps} explained streams={args.explain} "
            f"wall={wall:.0f}s"
        )
        print(f"test accuracy            {_fmt([r['accuracy'] for r in runs])}")
        print(f"true positives explained {_fmt([r['n_true_positive'] for r in runs], 1)}")
        print(f"max |sum terms - logit|  {max(r['conservation_max_abs'] for r in runs):.2e} (float64)")
        print(f"explain time / stream    {_fmt([r['explain_ms_per_stream'] for r in runs], 1)} ms")
        for name in ("full tree", "topology only"):
            terms = " ".join(
                f"{t}={_fmt([r[f'non_event[{name}]'][t] for r in runs], 2)}"
                for t in (*NON_EVENT_TERMS, "events")
            )
            print(f"mean terms, {name:<13} {terms}")
        _print_table(runs, "recall", "Recall@k of the planted trigger (true-positive streams)")
        _print_table(
            runs, "kl", "KL(p || p_S), model replayed on the k selected events only (lower is better)", 4
        )
        _print_table(runs, "dp", "|p - p_S| on the k selected events only (lower is better)")
        print("\nObjective each row optimises, KL(p || sigmoid(b + sum_S c)) with no replay ('no b': b = 0)")
        for method in runs[0]["surrogate_kl"]:
            cells = [_fmt([r["surrogate_kl"][method][i] for r in runs], 4) for i in range(len(KS))]
            print(f"{method:<24}" + "".join(f"{c:>17}" for c in cells))
        print("\nRecall@1 of the trigger (KL selection) vs memory-tree depth (0 = topology tree only)")
        for depth in args.depths:
            print(f"  max_depth={str(depth):<5} {_fmt([r['depth_recall@1'][str(depth)] for r in runs])}")
    finish_demo(args, table.getvalue(), {"ks": KS, "runs": runs}, wall)
    if not args.quick:  # matplotlib costs a second; the smoke run skips the figure
        _plot(runs, Path(args.out) / "memexplainer.png")
    return 0


def _plot(runs: list[dict], path: Path) -> None:
    """Recall@k and KL@k per method (mean over seeds)."""
    from latent.plotting import figure, save_figure

    fig, axes = figure(1, 2, figsize=(9, 3.5), extra="families")
    for method in METHODS:
        for ax, key in zip(axes, ("recall", "kl"), strict=True):
            vals = np.array([r[method][key] for r in runs], dtype=float)
            if not np.isnan(vals).all():
                ax.plot(KS, np.nanmean(vals, axis=0), marker="o", label=method)
    axes[0].set(xlabel="k", ylabel="trigger recall@k")
    axes[1].set(xlabel="k", ylabel="KL(p || p_S)", yscale="log")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
