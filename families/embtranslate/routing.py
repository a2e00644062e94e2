"""Routing threshold of the reference HMoE, chosen on held-out pairs instead of fixed.

The reference rule descends from a node while the nearest child is unambiguous, d1 <= tau * d2. In
high-dimensional embedding spaces the two nearest child centroids are often almost equally far, so at a
fixed tau every input can stop at the root and the hierarchy goes unused. Calibrating tau on pairs kept
out of fitting picks the threshold that translates those pairs best, among thresholds that actually
change the routing (quantiles of the held-out ratios d1 / d2 at the root).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hmoe_lora import LoRAHMoE

PAPER_TAU = 0.8


def root_ratios(h: LoRAHMoE, X: np.ndarray) -> np.ndarray:
    """d1 / d2 at the root for each row: the smallest tau at which that row leaves the root."""
    kids = h.nodes[h.root].children
    if len(kids) < 2:
        raise ValueError("The routing tree's root has fewer than 2 children; build it with num_levels >= 2.")
    cents = np.stack([h.nodes[c].centroid for c in kids])
    d = np.linalg.norm(np.asarray(X, dtype=np.float64)[:, None, :] - cents[None], axis=2)
    d.sort(axis=1)
    return d[:, 0] / np.maximum(d[:, 1], 1e-12)


def routing_shares(h: LoRAHMoE, X: np.ndarray) -> dict[str, float]:
    """Share of rows whose adapter is below the root, and share that reach a leaf adapter."""
    used = h.route(X)
    leaf_level = max(n.level for n in h.nodes)
    below = np.array([u >= 0 and u != h.root for u in used])
    leaf = np.array([u >= 0 and h.nodes[u].level == leaf_level for u in used])
    return {"left_root": float(below.mean()), "at_leaf": float(leaf.mean())}


def _cosine(h: LoRAHMoE, X: np.ndarray, Y: np.ndarray) -> float:
    y = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
    return float((h(X) * y).sum(1).mean())


@dataclass
class TauCalibration:
    """The chosen threshold and the held-out score of every candidate (mean cosine to the true targets)."""

    tau: float
    candidates: list[float]
    scores: list[float]
    left_root: list[float]


def calibrate_tau(
    h: LoRAHMoE, X_val: np.ndarray, Y_val: np.ndarray, num_quantiles: int = 9
) -> TauCalibration:
    """Pick tau maximising the mean cosine of translated held-out sources to their targets.

    Candidates: the paper's 0.8, 1.0 (always descend to a leaf), and quantiles of the held-out root
    ratios, so that each candidate sends a different share of inputs below the root. Ties go to the
    smaller tau (less routing).
    """
    X_val, Y_val = np.asarray(X_val, dtype=np.float64), np.asarray(Y_val, dtype=np.float64)
    if X_val.ndim != 2 or Y_val.ndim != 2 or len(X_val) != len(Y_val) or len(X_val) < 2:
        raise ValueError(
            f"calibrate_tau needs matching 2-D held-out pairs (at least 2), got {X_val.shape} and {Y_val.shape}."
        )
    q = np.quantile(root_ratios(h, X_val), np.linspace(0.0, 1.0, num_quantiles + 2)[1:-1])
    cands = sorted({round(float(t), 6) for t in (PAPER_TAU, 1.0, *q) if 0.0 <= t <= 1.0})
    scores, shares = [], []
    for t in cands:
        v = h.variant(tau=t)
        scores.append(_cosine(v, X_val, Y_val))
        shares.append(routing_shares(v, X_val)["left_root"])
    best = int(np.argmax(np.round(scores, 9)))  # argmax returns the first (smallest tau) among ties
    return TauCalibration(cands[best], cands, scores, shares)
