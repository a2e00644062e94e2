"""Embedding-translation demo on a retrieval corpus built from Python's own docstrings and pydoc topics.

Three real offline models (default A=glove, B=e5, C=minilm). We translate B-queries into C and search
native C documents (pairwise), search a C-index whose documents are mixed natives and translations from
A and B (mixing), and translate A-queries through B into C (chaining); re-embedding in C is the
reference. Also: AUROC of the confidence at predicting failed queries (gold document not in top 10).

Run: `python -m families.embtranslate.demo [--quick] [--seeds 3] [--out runs/embtranslate]`.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import numpy as np

from ..demo_cli import DemoParser, finish_demo
from .config import EmbTranslateConfig
from .data import Pair, build_corpus, split_by_family
from .embedders import MODELS, Embedder, cached_embed
from .model import (
    GeometricConfidence,
    HMoETranslator,
    chain,
    chained_bound,
    fit_mlp,
    fit_procrustes,
    fit_ridge,
    gold_ranks,
    nearest_anchor_similarity,
)

OOD_FAMILIES = ("langref", "net")  # language-reference prose and networking APIs never seen in training
METHODS = ("Procrustes", "Ridge", "MLP", "HMoE")


def _fit(method: str, X: np.ndarray, Y: np.ndarray, cfg: EmbTranslateConfig):  # noqa: ANN202
    """Return (translate, #trainable parameters, disagreement fn or None)."""
    if method == "Procrustes":
        m = fit_procrustes(X, Y)
        return m, m.W.size, None
    if method == "Ridge":
        m = fit_ridge(X, Y, cfg.ridge_alpha)
        return m, m.W.size + m.my.size, None
    if method == "MLP":
        f, n = fit_mlp(X, Y, cfg)
        return f, n, None
    h = HMoETranslator.fit(X, Y, cfg)
    return h.translate, h.num_trainable(), h.disagreement


def _auroc(fail: np.ndarray, risk: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(fail, risk)) if 0 < fail.sum() < len(fail) else float("nan")


def run_seed(emb: dict[str, dict[str, np.ndarray]], models: list[str], corpus: list[Pair], args, seed: int):  # noqa: ANN001, ANN201
    """One split: fit every method for B->C and A->C (and A->B for chains); return metric dict."""
    A, B, C = models
    split = split_by_family(corpus, OOD_FAMILIES, args.n_train, args.n_test, seed)
    train, id_test, ood_test = (np.asarray(split[k]) for k in ("train", "id", "ood"))
    n_cal = int(len(train) * args.cfg.calibration_fraction)
    fit_items, cal_items = train[n_cal:], train[:n_cal]

    def anchors(m: str, items: np.ndarray) -> np.ndarray:  # queries and documents are both anchors
        return np.concatenate([emb[m]["q"][items], emb[m]["d"][items]])

    cfg = EmbTranslateConfig(**{**args.cfg.__dict__, "seed": seed})
    out: dict = {}
    pools = {"ID": id_test, "OOD": ood_test}
    for name, pool in pools.items():  # re-embedding reference
        r = gold_ranks(emb[C]["q"][pool], emb[C]["d"][pool], np.arange(len(pool)))
        out[f"re-embed/{name}"] = {"r10": float((r < 10).mean()), "r100": float((r < 100).mean())}
    for method in args.methods:
        fitted = {
            (s, t): _fit(method, anchors(s, fit_items), anchors(t, fit_items), cfg)
            for s, t in ((B, C), (A, C), (A, B))
        }
        f_bc, n_params, dis_bc = fitted[(B, C)]
        f_ac, f_ab = fitted[(A, C)][0], fitted[(A, B)][0]
        res: dict = {"params": int(n_params)}
        for name, pool in pools.items():
            gold = np.arange(len(pool))
            docs_c = emb[C]["d"][pool]
            r = gold_ranks(f_bc(emb[B]["q"][pool]), docs_c, gold)
            res[name] = {"r10": float((r < 10).mean()), "r100": float((r < 100).mean())}
            # mixing: a C-index holding native docs and docs translated from A and from B, native C queries
            part = np.arange(len(pool)) % 3
            mixed = np.where((part == 1)[:, None], f_bc(emb[B]["d"][pool]), docs_c)
            mixed = np.where((part == 2)[:, None], f_ac(emb[A]["d"][pool]), mixed)
            r = gold_ranks(emb[C]["q"][pool], mixed, gold)
            res[f"mix/{name}"] = {"r10": float((r < 10).mean()), "r100": float((r < 100).mean())}
            for tag, f in (("chain", chain(f_ab, f_bc)), ("direct A->C", f_ac)):
                r = gold_ranks(f(emb[A]["q"][pool]), docs_c, gold)
                res[f"{tag}/{name}"] = {"r10": float((r < 10).mean()), "r100": float((r < 100).mean())}
        # confidence: does it flag queries whose gold document misses the top 10?
        both = np.concatenate([id_test, ood_test])
        is_ood = np.r_[np.zeros(len(id_test)), np.ones(len(ood_test))].astype(bool)
        xq = emb[B]["q"][both]
        fail = np.r_[
            gold_ranks(f_bc(emb[B]["q"][id_test]), emb[C]["d"][id_test], np.arange(len(id_test))) >= 10,
            gold_ranks(f_bc(emb[B]["q"][ood_test]), emb[C]["d"][ood_test], np.arange(len(ood_test))) >= 10,
        ]
        conf = GeometricConfidence.fit(f_bc, anchors(B, cal_items), anchors(C, cal_items), cfg.knn, dis_bc)
        c = conf.confidence(xq)
        res["auroc_geom"] = _auroc(fail, -c)
        res["auroc_nn"] = _auroc(fail, -nearest_anchor_similarity(xq, anchors(B, fit_items)))
        res["conf_id"], res["conf_ood"] = float(c[~is_ood].mean()), float(c[is_ood].mean())
        conf_ab = GeometricConfidence.fit(f_ab, anchors(A, cal_items), anchors(B, cal_items), cfg.knn)
        xa = emb[A]["q"][both]
        fail_chain = np.r_[
            gold_ranks(chain(f_ab, f_bc)(emb[A]["q"][id_test]), emb[C]["d"][id_test], np.arange(len(id_test)))
            >= 10,
            gold_ranks(
                chain(f_ab, f_bc)(emb[A]["q"][ood_test]), emb[C]["d"][ood_test], np.arange(len(ood_test))
            )
            >= 10,
        ]
        res["auroc_chain"] = _auroc(fail_chain, chained_bound(xa, f_ab, conf_ab, conf))
        out[method] = res
    return out


def _ms(vals: list[float]) -> str:
    a = np.asarray(vals, dtype=float)
    return f"{np.nanmean(a):.3f}+-{np.nanstd(a):.3f}" if np.isfinite(a).any() else "n/a"


def main(argv: list[str] | None = None) -> int:
    """Embed the corpus (cached), run all seeds, print the tables, write results.json."""
    ap = DemoParser("embtranslate", __doc__, seeds=3, quick_seeds=1)
    ap.add_argument("--models", default="glove,e5,minilm", help=f"A,B,C from {MODELS} (chain A->B->C)")
    ap.add_argument("--cache", type=Path, default=None, help="embedding cache folder (default OUT/cache)")
    args = ap.parse_demo(argv)
    models = args.models.split(",")
    if len(models) != 3 or any(m not in MODELS for m in models):
        ap.error(f"--models needs three names from {MODELS}, got {args.models!r}")
    args.cache = args.cache or Path(args.out) / "cache"
    import torch

    torch.set_num_threads(1)  # small matrices: one thread avoids contention on the shared 2-core box
    args.methods = METHODS
    args.cfg = EmbTranslateConfig(steps=40 if args.quick else 400)
    args.n_train, args.n_test = (110, 60) if args.quick else (560, 300)
    t0 = time.time()
    corpus = build_corpus()
    if args.quick:  # keep a small random subset with both ID and OOD items
        keep = np.random.default_rng(0).permutation(len(corpus))[:320]
        corpus = [corpus[i] for i in sorted(keep)]
    emb = {}
    for m in dict.fromkeys(models):
        e = Embedder(m)
        emb[m] = {
            "q": cached_embed(e, [p.query for p in corpus], True, args.cache),
            "d": cached_embed(e, [p.document for p in corpus], False, args.cache),
        }
    t_embed = time.time() - t0
    runs = [run_seed(emb, models, corpus, args, s) for s in range(args.seeds)]
    wall = time.time() - t0
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        A, B, C = models
        print(
            f"Retrieval over {args.n_test} ID and {args.n_test} OOD ({'+'.join(OOD_FAMILIES)}) pairs; "
            f"translate {B}->{C}; mix = {C}-index with 1/3 native, 1/3 from {B}, 1/3 from {A}; chain {A}->{B}->{C}"
        )
        head = (
            f"{'method':<12}{'params':>9} {'ID R@10':>13} {'ID R@100':>13} {'OOD R@10':>13} {'OOD R@100':>13} "
            f"{'mix OOD R@100':>14} {'chain OOD R@100':>16} {'direct A->C R@100':>18}"
        )
        print(head)
        print("-" * len(head))
        ref = [r for r in runs]
        print(
            f"{'re-embed':<12}{'-':>9} {_ms([r['re-embed/ID']['r10'] for r in ref]):>13} "
            f"{_ms([r['re-embed/ID']['r100'] for r in ref]):>13} {_ms([r['re-embed/OOD']['r10'] for r in ref]):>13} "
            f"{_ms([r['re-embed/OOD']['r100'] for r in ref]):>13} {_ms([r['re-embed/OOD']['r100'] for r in ref]):>14}"
        )
        for m in args.methods:
            g = [r[m] for r in runs]
            print(
                f"{m:<12}{g[0]['params']:>9} {_ms([x['ID']['r10'] for x in g]):>13} {_ms([x['ID']['r100'] for x in g]):>13} "
                f"{_ms([x['OOD']['r10'] for x in g]):>13} {_ms([x['OOD']['r100'] for x in g]):>13} "
                f"{_ms([x['mix/OOD']['r100'] for x in g]):>14} {_ms([x['chain/OOD']['r100'] for x in g]):>16} "
                f"{_ms([x['direct A->C/OOD']['r100'] for x in g]):>18}"
            )
        print()
        head2 = f"{'method':<12} {'AUROC geom':>13} {'AUROC NN-sim':>13} {'AUROC chain':>13} {'conf ID':>13} {'conf OOD':>13}"
        print(head2)
        print("-" * len(head2))
        for m in args.methods:
            g = [r[m] for r in runs]
            print(
                f"{m:<12} {_ms([x['auroc_geom'] for x in g]):>13} {_ms([x['auroc_nn'] for x in g]):>13} "
                f"{_ms([x['auroc_chain'] for x in g]):>13} {_ms([x['conf_id'] for x in g]):>13} {_ms([x['conf_ood'] for x in g]):>13}"
            )
        print(f"seeds={args.seeds} models={args.models} embed={t_embed:.0f}s wall={wall:.0f}s")
    args.cfg, args.cache = vars(args.cfg), str(args.cache)  # plain values for results.json
    finish_demo(args, table.getvalue(), {"models": models, "runs": runs}, wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
