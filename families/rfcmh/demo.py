"""RFCMH demo: cross-modal hashing on two halves of sklearn digits under symmetric label noise.

Run: `python -m families.rfcmh.demo [--quick] [--seeds 3] [--out runs/rfcmh]`.
Prints mAP@all (I2T, T2I) and the AUROC of each method's label-reliability score, mean +- std over seeds.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import cleanlab_issues, softmax_label_confidence, train_supervised_hashing
from .config import RFCMHConfig
from .data import TwoViewSplit, digits_two_view
from .model import mean_average_precision, sample_reliability, train_rfcmh
from .robust_baselines import train_rshnl, train_scbch

METHODS = ("RFCMH", "RSHNL", "SCBCH", "CE", "LabelSmooth(0.3)", "cleanlab+CE", "PML-MultiSim")
ABLATIONS = {
    "RFCMH-1 (no warm-up)": dict(warmup_epochs=0),
    "RFCMH-3 (no DGSA)": dict(use_dgsa=False),
    "RFCMH-4 (no necessity)": dict(use_necessity=False),
    "RFCMH (PDF non-label n)": dict(nonlabel_necessity="paper_literal"),
}


def _evaluate(model: torch.nn.Module, d: TwoViewSplit) -> tuple[float, float]:
    """Queries = held-out pairs; database = training pairs; relevance uses clean labels."""
    qi, qt = model.encode(d.x1_query, 0), model.encode(d.x2_query, 1)
    di, dt = model.encode(d.x1_train, 0), model.encode(d.x2_train, 1)
    return (
        mean_average_precision(qi, dt, d.y_query, d.y_train_clean),
        mean_average_precision(qt, di, d.y_query, d.y_train_clean),
    )


def _auroc(score: np.ndarray, d: TwoViewSplit) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(~d.flipped, score)) if 0 < d.flipped.sum() < len(d.flipped) else float("nan")


def run_method(method: str, cfg: RFCMHConfig, d: TwoViewSplit) -> dict[str, float]:
    """Train one method on the noisy split; return I2T/T2I mAP and AUROC of its reliability score."""
    x1, x2, y = d.x1_train, d.x2_train, d.y_train_noisy
    if method.startswith("RFCMH"):
        model = train_rfcmh(replace(cfg, **ABLATIONS.get(method, {})), x1, x2, y)
        score = sample_reliability(model, x1, x2, y).numpy()
    elif method in ("RSHNL", "SCBCH"):  # noise-robust hashing baselines from the paper's table
        model, weight = (train_rshnl if method == "RSHNL" else train_scbch)(cfg, x1, x2, y)
        score = weight.numpy()
    elif method == "cleanlab+CE":
        issues, score = cleanlab_issues(x1, x2, y, cfg.seed)
        keep = torch.from_numpy(~issues)
        model = train_supervised_hashing(cfg, x1[keep], x2[keep], y[keep])
    else:
        kw = {"CE": {}, "LabelSmooth(0.3)": {"label_smoothing": 0.3}, "PML-MultiSim": {"metric_loss": "ms"}}[
            method
        ]
        model = train_supervised_hashing(cfg, x1, x2, y, **kw)
        score = softmax_label_confidence(model, x1, x2, y).numpy()
    i2t, t2i = _evaluate(model, d)
    return {"i2t": i2t, "t2i": t2i, "auroc": _auroc(score, d)}


def _fmt(vals: list[float]) -> str:
    a = np.asarray(vals, dtype=float)
    return "n/a" if np.isnan(a).all() else f"{np.nanmean(a):.3f} +- {np.nanstd(a):.3f}"


@dataclass
class RfcmhFlags:
    """The rfcmh demo's own flags (next to the shared --quick, --seeds, --out)."""

    epochs: int | None = field(default=None, metadata={"help": "override training epochs"})
    methods: str | None = field(
        default=None, metadata={"help": f"comma list, subset of {','.join(METHODS)} (quick mode)"}
    )
    noise: float = field(default=0.6, metadata={"help": "symmetric label-noise rate of the quick mode"})
    bits: int = field(default=16, metadata={"help": "code length of the quick mode"})
    n_train: int = field(default=400, metadata={"help": "training pairs of the quick mode"})


RfcmhDemo = demo_config("rfcmh", RfcmhFlags, seeds=3, quick_seeds=1)


def main(argv: list[str] | None = None) -> int:
    """Run the noise-rate and code-length sweeps and print one table."""
    return run_demo(RfcmhDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    if args.epochs is not None and args.epochs < 1:
        raise UsageError(f"--epochs must be >= 1, got {args.epochs}")
    if not 0.0 <= args.noise < 1.0:
        raise UsageError(f"--noise must lie in [0, 1), got {args.noise}")
    if args.bits < 1 or args.n_train < 20:
        raise UsageError(f"--bits must be >= 1 and --n-train >= 20, got {args.bits} and {args.n_train}")
    torch.set_num_threads(1)  # the demo machine is a shared 2-core box
    epochs = args.epochs or (3 if args.quick else 20)
    methods_q = tuple(args.methods.split(",")) if args.methods else METHODS
    unknown = set(methods_q) - set(METHODS) - set(ABLATIONS)
    if unknown:
        raise UsageError(f"unknown --methods {sorted(unknown)}; choose from {METHODS}")
    if args.quick:
        settings = [(args.noise, args.bits, methods_q)]
    else:  # noise sweep at 32 bits; bit sweep and ablations at noise 0.6
        settings = [(r, 32, METHODS) for r in (0.2, 0.4, 0.6, 0.8)]
        settings += [(0.6, b, ("RFCMH", "CE")) for b in (16, 64, 128)]
        settings += [(0.6, 32, tuple(ABLATIONS))]
    t0 = time.time()
    rows = []
    for noise, bits, methods in settings:
        for method in methods:
            res = []
            for seed in range(args.seeds):
                d = digits_two_view(noise, seed, n_train=args.n_train if args.quick else 1300)
                cfg = RFCMHConfig(num_bits=bits, epochs=epochs, seed=seed, warmup_epochs=min(3, epochs))
                res.append(run_method(method, cfg, d))
            rows.append({"noise": noise, "bits": bits, "method": method, "runs": res})
    wall = time.time() - t0
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        header = (
            f"{'noise':>5} {'bits':>4}  {'method':<24} {'mAP I2T':>15} {'mAP T2I':>15} {'AUROC(clean)':>15}"
        )
        print(header)
        print("-" * len(header))
        for r in rows:
            cols = [_fmt([x[k] for x in r["runs"]]) for k in ("i2t", "t2i", "auroc")]
            print(
                f"{r['noise']:>5} {r['bits']:>4}  {r['method']:<24} {cols[0]:>15} {cols[1]:>15} {cols[2]:>15}"
            )
        print(f"seeds={args.seeds} epochs={epochs} wall={wall:.0f}s")
    finish_demo(args, table.getvalue(), {"epochs": epochs, "rows": rows}, wall)
    _plot(rows, Path(args.out) / "map_vs_noise.png")
    return 0


def _plot(rows: list[dict], path: Path) -> None:
    """mAP (mean of I2T and T2I) against noise rate at 32 bits, one line per method (skipped if < 2 rates)."""
    if len({r["noise"] for r in rows if r["bits"] == 32}) < 2:
        return
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(5, 3.5), extra="families")
    for method in METHODS:
        pts = [
            (r["noise"], np.mean([(x["i2t"] + x["t2i"]) / 2 for x in r["runs"]]))
            for r in rows
            if r["method"] == method and r["bits"] == 32
        ]
        if len(pts) > 1:
            ax.plot(*zip(*pts, strict=True), marker="o", label=method)
    ax.set_xlabel("symmetric label noise")
    ax.set_ylabel("mAP@all (mean of I2T, T2I)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
