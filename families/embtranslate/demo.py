"""Embedding-translation demo on a retrieval corpus built from Python's own docstrings and pydoc topics.

Three real offline models (default A=glove, B=e5, C=minilm). We translate B-queries into C and search
native C documents (pairwise), search a C-index whose documents are mixed natives and translations from
A and B (mixing), and translate A-queries through B into C (chaining); re-embedding in C is the
reference. Every query searches one gallery holding all held-out documents (ID and OOD together), so
ranks run over hundreds of candidates. Also: AUROC of each confidence at predicting failed queries (gold
document not in the top 10).

Run: `python -m families.embtranslate.demo [--quick] [--seeds 3] [--out runs/embtranslate]`.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .config import EmbTranslateConfig, LoRAHMoEConfig
from .data import Pair, build_corpus, split_by_family
from .embedders import MODELS, Embedder, cached_embed
from .hmoe_lora import LoRAHMoE, TranslationConfidence
from .model import (
    GeometricConfidence,
    HMoETranslator,
    chain,
    chained_bound,
    fit_mlp,
    fit_procrustes,
    fit_ridge,
    gold_ranks,
)

OOD_FAMILIES = ("langref", "net")  # language-reference prose and networking APIs never seen in training
REFERENCE = "HMoE-LoRA (reference)"
LEAF = "HMoE-LoRA, leaf routing"  # same fit; always descends to a leaf, as the reference code's router does
BASE = "SELU MLP base alone"  # same fit; the frozen L1 base without adapters
ABLATION = "HMoE (ours, ablation)"
METHODS = ("Procrustes", "Ridge", "MLP", ABLATION, REFERENCE)
ROWS = ("Procrustes", "Ridge", "MLP", ABLATION, BASE, REFERENCE, LEAF)


def _fit(method: str, X: np.ndarray, Y: np.ndarray, cfg: EmbTranslateConfig, ref: LoRAHMoEConfig):  # noqa: ANN202
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
    if method == REFERENCE:
        h = LoRAHMoE.fit(X, Y, ref)
        return h, h.num_base() + h.num_trainable(), None
    h = HMoETranslator.fit(X, Y, cfg)
    return h.translate, h.num_trainable(), h.disagreement


def _auroc(fail: np.ndarray, risk: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(fail, risk)) if 0 < fail.sum() < len(fail) else float("nan")


def _scores(ranks: np.ndarray) -> dict[str, float]:
    return {
        "r10": float((ranks < 10).mean()),
        "r100": float((ranks < 100).mean()),
        "mrr": float((1.0 / (ranks + 1)).mean()),
    }


def _evaluate(maps, emb, models, queries, gold, gallery, tcs, anchors, fit_items, cal_items, cfg) -> dict:  # noqa: ANN001
    """Pairwise, mixing and chaining retrieval plus confidence AUROCs for one method's fitted maps."""
    A, B, C = models
    f_bc, n_params, dis_bc = maps["BC"]
    f_ac, f_ab = maps["AC"][0], maps["AB"][0]
    f_chain = chain(f_ab, maps.get("BC2", maps["BC"])[0])
    docs_c = emb[C]["d"][gallery]
    part = np.arange(len(gallery)) % 3
    res: dict = {"params": int(n_params)}
    mixed = np.where((part == 1)[:, None], f_bc(emb[B]["d"][gallery]), docs_c)
    mixed = np.where((part == 2)[:, None], f_ac(emb[A]["d"][gallery]), mixed)
    fail, fail_chain = [], []
    for name, q in queries.items():
        r = gold_ranks(f_bc(emb[B]["q"][q]), docs_c, gold[name])
        res[name] = _scores(r)
        fail.append(r >= 10)
        res[f"mix/{name}"] = _scores(gold_ranks(emb[C]["q"][q], mixed, gold[name]))
        r = gold_ranks(f_chain(emb[A]["q"][q]), docs_c, gold[name])
        res[f"chain/{name}"] = _scores(r)
        fail_chain.append(r >= 10)
        res[f"direct A->C/{name}"] = _scores(gold_ranks(f_ac(emb[A]["q"][q]), docs_c, gold[name]))
    # confidence: does it flag queries whose gold document misses the top 10?
    both = np.concatenate([queries["id"], queries["ood"]])
    is_ood = np.r_[np.zeros(len(queries["id"])), np.ones(len(queries["ood"]))].astype(bool)
    fail, fail_chain = np.concatenate(fail), np.concatenate(fail_chain)
    xq, xa = emb[B]["q"][both], emb[A]["q"][both]
    tc, tc_a = tcs
    c_tc = tc.score(xq)
    res["auroc_tc"] = _auroc(fail, -c_tc)
    res["tc_id"], res["tc_ood"] = float(c_tc[~is_ood].mean()), float(c_tc[is_ood].mean())
    res["auroc_tc_chain"] = _auroc(fail_chain, -tc_a.score(xa))
    conf = GeometricConfidence.fit(f_bc, anchors(B, cal_items), anchors(C, cal_items), cfg.knn, dis_bc)
    res["auroc_geom"] = _auroc(fail, -conf.confidence(xq))
    conf_ab = GeometricConfidence.fit(f_ab, anchors(A, cal_items), anchors(B, cal_items), cfg.knn)
    res["auroc_geom_chain"] = _auroc(fail_chain, chained_bound(xa, f_ab, conf_ab, conf))
    return res


def run_seed(emb: dict[str, dict[str, np.ndarray]], models: list[str], corpus: list[Pair], args, seed: int):  # noqa: ANN001, ANN201
    """One split: fit every method for B->C and A->C (and A->B for chains); return metric dict."""
    A, B, C = models
    split = split_by_family(corpus, OOD_FAMILIES, args.n_train, args.n_test, seed)
    train = np.asarray(split["train"])
    gallery = np.setdiff1d(np.arange(len(corpus)), train)  # every held-out document, ID and OOD
    where = {int(g): i for i, g in enumerate(gallery)}
    queries = {k: np.asarray(split[k]) for k in ("id", "ood")}
    gold = {k: np.array([where[int(i)] for i in v]) for k, v in queries.items()}
    n_cal = int(len(train) * args.cfg.calibration_fraction)
    fit_items, cal_items = train[n_cal:], train[:n_cal]

    def anchors(m: str, items: np.ndarray) -> np.ndarray:  # queries and documents are both anchors
        return np.concatenate([emb[m]["q"][items], emb[m]["d"][items]])

    cfg = replace(args.cfg, seed=seed)
    ref = replace(args.ref, seed=seed)
    docs_c = emb[C]["d"][gallery]
    out: dict = {"gallery": len(gallery)}
    for name, q in queries.items():  # re-embedding reference
        out[f"re-embed/{name}"] = _scores(gold_ranks(emb[C]["q"][q], docs_c, gold[name]))
    tc = TranslationConfidence.fit(anchors(B, fit_items), seed=seed)
    tc_a = TranslationConfidence.fit(anchors(A, fit_items), seed=seed)
    for method in args.methods:
        t0 = time.process_time()
        pairs = {"BC": (B, C, ref), "AC": (A, C, ref), "AB": (A, B, ref)}
        if method == REFERENCE:  # second hop of a chain: residual along the target's second direction
            pairs["BC2"] = (B, C, replace(ref, dir_channel="u2"))
        fitted = {
            k: _fit(method, anchors(s, fit_items), anchors(t, fit_items), cfg, r)
            for k, (s, t, r) in pairs.items()
        }
        fit_cpu = time.process_time() - t0
        if method == REFERENCE:
            variants = {
                REFERENCE: lambda h: h,
                LEAF: lambda h: h.variant(tau=1.0),
                BASE: lambda h: h.variant(adapters=False),
            }
        else:
            variants = {method: lambda f: f}
        for row, pick in variants.items():
            maps = {k: (pick(f), n, d) for k, (f, n, d) in fitted.items()}
            res = _evaluate(
                maps, emb, models, queries, gold, gallery, (tc, tc_a), anchors, fit_items, cal_items, cfg
            )
            if row == BASE:
                res["params"] = fitted["BC"][0].num_base()
            if method == REFERENCE:
                routed = maps["BC"][0].route(emb[B]["q"][np.concatenate([queries["id"], queries["ood"]])])
                levels = np.array([maps["BC"][0].nodes[n].level if n >= 0 else -1 for n in routed])
                res["leaf_share"] = float((levels == args.ref.num_levels - 1).mean())
            res["cpu_s"] = fit_cpu
            out[row] = res
    return out


def _ms(vals: list[float]) -> str:
    a = np.asarray(vals, dtype=float)
    return f"{np.nanmean(a):.3f}+-{np.nanstd(a):.3f}" if np.isfinite(a).any() else "n/a"


def _print_tables(runs: list[dict], args, models: list[str], t_embed: float, wall: float) -> None:  # noqa: ANN001
    A, B, C = models
    print(
        f"Retrieval of {args.n_test} ID and {args.n_test} OOD ({'+'.join(OOD_FAMILIES)}) queries in one gallery "
        f"of {runs[0]['gallery']} held-out documents; translate {B}->{C}; mix = {C}-index with 1/3 native, "
        f"1/3 from {B}, 1/3 from {A}; chain {A}->{B}->{C}"
    )
    cols = [
        ("ID R@10", "id", "r10"),
        ("ID R@100", "id", "r100"),
        ("OOD R@10", "ood", "r10"),
        ("OOD R@100", "ood", "r100"),
        ("OOD MRR", "ood", "mrr"),
        ("mix OOD R@100", "mix/ood", "r100"),
        ("chain OOD R@100", "chain/ood", "r100"),
        ("direct A->C R@100", "direct A->C/ood", "r100"),
    ]
    head = f"{'method':<24}{'params':>10} " + " ".join(f"{c[0]:>13}" for c in cols)
    print(head)
    print("-" * len(head))
    ref_cols = {"id": "re-embed/id", "ood": "re-embed/ood", "mix/ood": "re-embed/ood"}
    cells = [_ms([r[ref_cols[g]][k] for r in runs]) if g in ref_cols else "" for _, g, k in cols]
    print(f"{'re-embed':<24}{'-':>10} " + " ".join(f"{c:>13}" for c in cells))
    for m in args.rows:
        g = [r[m] for r in runs]
        cells = [_ms([x[grp][k] for x in g]) for _, grp, k in cols]
        print(f"{m:<24}{g[0]['params']:>10} " + " ".join(f"{c:>13}" for c in cells))
    print()
    cols2 = [
        ("AUROC TC", "auroc_tc"),
        ("AUROC geom", "auroc_geom"),
        ("AUROC TC chain", "auroc_tc_chain"),
        ("AUROC geom ch.", "auroc_geom_chain"),
        ("TC ID", "tc_id"),
        ("TC OOD", "tc_ood"),
        ("CPU s", "cpu_s"),
    ]
    head2 = f"{'method':<24} " + " ".join(f"{c[0]:>14}" for c in cols2)
    print(head2)
    print("-" * len(head2))
    for m in args.rows:
        g = [r[m] for r in runs]
        print(f"{m:<24} " + " ".join(f"{_ms([x[k] for x in g]):>14}" for _, k in cols2))
    for row in (REFERENCE, LEAF):
        share = _ms([r[row]["leaf_share"] for r in runs])
        print(f"{row}: share of test queries routed down to a leaf: {share}")
    print(
        f"{REFERENCE}: tau={args.ref.tau}. CPU s: fitting the method's maps per seed (the rows {BASE!r}, {REFERENCE!r} and {LEAF!r} share one fit)"
    )
    print(f"seeds={args.seeds} models={args.models} embed={t_embed:.0f}s wall={wall:.0f}s")


@dataclass
class EmbtranslateFlags:
    """The embtranslate demo's own flags (next to the shared --quick, --seeds, --out)."""

    models: str = field(default="glove,e5,minilm", metadata={"help": f"A,B,C from {MODELS} (chain A->B->C)"})
    cache: str | None = field(default=None, metadata={"help": "embedding cache folder (default OUT/cache)"})


EmbtranslateDemo = demo_config("embtranslate", EmbtranslateFlags, seeds=3, quick_seeds=1)


def main(argv: list[str] | None = None) -> int:
    """Embed the corpus (cached), run all seeds, print the tables, write results.json."""
    return run_demo(EmbtranslateDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    models = args.models.split(",")
    if len(models) != 3 or any(m not in MODELS for m in models):
        raise UsageError(f"--models needs three names from {MODELS}, got {args.models!r}")
    args.cache = Path(args.cache) if args.cache else Path(args.out) / "cache"
    import torch

    torch.set_num_threads(1)  # small matrices: one thread avoids contention on the shared 2-core box
    args.methods, args.rows = METHODS, ROWS
    args.cfg = EmbTranslateConfig(steps=40 if args.quick else 400)
    quick_ref = {"base_steps": 40, "lora_steps": 10, "hidden_dim": 128}
    args.ref = LoRAHMoEConfig(**quick_ref) if args.quick else LoRAHMoEConfig()
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
        _print_tables(runs, args, models, t_embed, wall)
    args.cfg, args.ref, args.cache = (
        vars(args.cfg),
        vars(args.ref),
        str(args.cache),
    )  # plain values for results.json
    finish_demo(args, table.getvalue(), {"models": models, "runs": runs}, wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
