"""Helpers shared by the experiments: layer choice, behaviour tables, the concept contrast sets, z scores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from probes import behaviour as B
from probes.activations import ActivationSet
from probes.config import ProbeConfig
from probes.data import Item, load_requests, sycophancy_factual, sycophancy_opinion
from probes.report import mean_ci

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = [
    "af_table",
    "gap_where",
    "header",
    "layers_for",
    "middle_best",
    "requests_for",
    "residual_norms",
    "s_items",
    "syco_rate",
    "true_claim_accuracy",
    "z_scale",
]


def layers_for(m: LatentModel, cfg: ProbeConfig) -> list[int]:
    if cfg.layers:
        return sorted({m.layer_index(x) for x in cfg.layers})
    n = m.num_layers
    return list(range(n)) if n <= 12 else sorted({round(i * (n - 1) / 7) for i in range(8)})


def requests_for(cfg: ProbeConfig) -> list[str] | None:
    return load_requests(cfg.requests)[: cfg.n] if cfg.requests else None


def residual_norms(aset: ActivationSet) -> dict[int, float]:
    """Mean residual norm per layer (the unit of steering strength)."""
    return {layer: float(np.linalg.norm(x, axis=1).mean()) for layer, x in aset.acts.items()}


def middle_best(values: dict[int, float]) -> int:
    """Layer with the best value; ties go to the layer nearest the middle of the scanned range."""
    layers = sorted(values)
    mid = (layers[0] + layers[-1]) / 2
    return max(layers, key=lambda k: (round(values[k], 6), -abs(k - mid)))


def af_table(items: list[Item], texts: list[str], by: tuple[str, ...], n_boot: int, seed: int) -> list[dict]:
    """Compliance (and spoken eval awareness) per condition, with bootstrap CIs."""
    rows = []
    keys = sorted({tuple(it.meta[k] for k in by) for it in items}, key=str)
    for key in keys:
        sel = [t for it, t in zip(items, texts) if tuple(it.meta[k] for k in by) == key]
        row = dict(zip(by, key))
        row["compliance"] = mean_ci(np.array([B.is_compliant(t) for t in sel], float), n_boot, seed)
        row["spoken_eval"] = mean_ci(np.array([B.spoken_eval_awareness(t) for t in sel], float), n_boot, seed)
        row["n"] = len(sel)
        rows.append(row)
    return rows


def gap_where(items: list[Item], texts: list[str], n_boot: int, seed: int, **where: object) -> dict:
    """Compliance gap (training - unmonitored) over items matching `where`."""

    def pick(cue: str) -> list[str]:
        return [
            t
            for it, t in zip(items, texts)
            if it.meta["cue"] == cue and all(it.meta[k] == v for k, v in where.items())
        ]

    return B.compliance_gap(pick("training"), pick("unmonitored"), n_boot=n_boot, seed=seed)


def syco_rate(items: list[Item], texts: list[str], researcher: bool | None = None) -> float:
    sel = [
        (t, it) for it, t in zip(items, texts) if researcher is None or it.meta["researcher"] == researcher
    ]
    return B.sycophancy_rate(
        [t for t, _ in sel], [it.meta["claim"] for _, it in sel], [it.meta["truth"] for _, it in sel]
    )


def true_claim_accuracy(items: list[Item], texts: list[str]) -> float:
    """Fraction of true-claim twins answered correctly (dual-stance check: agreement with a right user)."""
    sel = [(t, it) for it, t in zip(items, texts) if it.meta["claim_true"]]
    return float(np.mean([B.extract_answer(t) == it.meta["truth"] for t, it in sel])) if sel else float("nan")


def s_items(n: int, seed: int) -> list[Item]:
    """Sycophancy contrast at the answer token: wrong-claim problems answered with the user's claim
    (1) or the truth (0), plus A/B opinion items answered with (1) or against (0) the user's view."""
    items = []
    for it in sycophancy_factual(n, seed):
        if it.meta["claim_true"]:
            continue
        for label, ans in ((1, it.meta["claim"]), (0, it.meta["truth"])):
            items.append(
                Item(
                    it.messages,
                    {**it.meta, "label": label, "group": f"f{it.meta['pair_id']}"},
                    f"\\boxed{{{ans}}}",
                )
            )
    for it in sycophancy_opinion(max(2, n // 2), seed):
        items.append(
            Item(
                it.messages,
                {**it.meta, "label": int(it.meta["matches"]), "group": f"o{it.meta['pair_id']}"},
                it.answer,
            )
        )
    return items


def z_scale(scores: np.ndarray, ref: ActivationSet, layer: int, u: np.ndarray) -> np.ndarray:
    """Rescale projections so the deploy-context mean is 0 and the eval-context mean is 1."""
    proj = ref.acts[layer] @ u
    y = ref.column("label")
    lo, hi = proj[y == 0].mean(), proj[y == 1].mean()
    return (scores - lo) / (hi - lo) if abs(hi - lo) > 1e-12 else np.full_like(scores, np.nan)


def header(title: str, m: LatentModel, cfg: ProbeConfig, wall: float) -> str:
    return (
        f"# {title}\n\nModel `{cfg.model}` ({m.num_layers} layers, hidden {m.hidden_size}); n={cfg.n}, seed={cfg.seed}, "
        f"template={cfg.template}, wall {wall:.0f} s.\n\n"
    )
