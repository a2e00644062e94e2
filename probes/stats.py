"""Intervals that respect how the data were drawn, and the decision rule the reports apply.

Rows that share a request (the same request under several cue or assertion conditions, or the four
prompts of one contrast pair) are not independent: resampling rows makes intervals too narrow. Here
the resampling unit is the cluster (request / pair id), and a statistic may refit its directions on
each resample, so the interval also carries the uncertainty of the probe itself. The resampling is
`scipy.stats.bootstrap` over cluster ids (percentile intervals).

Decision rule (fixed before any run; the reports print the label it gives):

* `supported`: the 95% interval lies entirely on the predicted side of the null value;
* `contradicted`: it lies entirely on the other side;
* `not measurable on this model`: it contains the null value. When it also lies inside
  (-`smallest`, +`smallest`), the label adds "equivalent to zero within +/-smallest".

Validity gate (`gate`): a comparison read with an instrument only gets a label from the rule above when the
instrument first separates labelled examples, i.e. its held-out AUROC interval lies above 0.5. Otherwise
the label is `instrument invalid`, whatever the comparison's own interval says: an instrument at chance
can still move by a point between conditions, and that shift says nothing about the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as sps

from eval.report import wilson

__all__ = [
    "INVALID",
    "cluster_bootstrap",
    "cluster_means",
    "decide",
    "gate",
    "instrument_valid",
    "paired_effect",
]

INVALID = "instrument invalid"


def _cluster_index(clusters: np.ndarray) -> list[np.ndarray]:
    """Row indices of each distinct cluster id, in sorted id order."""
    clusters = np.asarray(clusters)
    if clusters.ndim != 1 or clusters.size == 0:
        raise ValueError(f"`clusters` must be a non-empty 1-D array of ids, got shape {clusters.shape}.")
    ids, inverse = np.unique(clusters, return_inverse=True)
    if len(ids) < 2:
        raise ValueError("a cluster bootstrap needs at least two clusters (e.g. two requests).")
    return [np.flatnonzero(inverse == k) for k in range(len(ids))]


def cluster_bootstrap(
    statistic: Callable[..., float],
    clusters: Sequence[np.ndarray],
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """Percentile interval of `statistic(*row_indices)` with clusters resampled with replacement.

    Args:
        statistic: takes one array of row indices per sample (rows may repeat, whole clusters at a
            time) and returns a float; it may refit directions on those rows.
        clusters: one array of cluster ids per sample (one id per row). Samples are resampled
            independently of each other (e.g. contrast pairs and scenario requests).
        n_resamples: bootstrap resamples.

    Returns {"mean", "lo", "hi", "n", "n_clusters", "se"}: `mean` is the statistic on all rows, `n` the
    rows of the first sample, `se` the bootstrap standard deviation.
    """
    if n_resamples < 2:
        raise ValueError(f"`n_resamples` must be >= 2, got {n_resamples}.")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level}.")
    if not clusters:
        raise ValueError("`clusters` is empty: pass one array of cluster ids per sample.")
    index = [_cluster_index(c) for c in clusters]

    def rows(picks: np.ndarray, idx: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([idx[int(k)] for k in picks])

    def on_clusters(*picks: np.ndarray) -> float:
        return float(statistic(*[rows(p, idx) for p, idx in zip(picks, index)]))

    point = float(statistic(*[np.arange(len(np.asarray(c))) for c in clusters]))
    res = sps.bootstrap(
        tuple(np.arange(len(idx)) for idx in index),
        on_clusters,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        vectorized=False,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    return {
        "mean": point,
        "lo": float(res.confidence_interval.low),
        "hi": float(res.confidence_interval.high),
        "n": int(len(np.asarray(clusters[0]))),
        "n_clusters": len(index[0]),
        "se": float(res.standard_error),
    }


def cluster_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Mean of `values` within each cluster (sorted id order): one number per independent unit."""
    values = np.asarray(values, dtype=float)
    return np.array([values[i].mean() for i in _cluster_index(clusters)])


def paired_effect(diffs: np.ndarray, clusters: np.ndarray, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Mean paired difference and the standardised effect d_z (mean / sd of per-cluster mean
    differences), each with a cluster-bootstrap 95% interval."""
    diffs = np.asarray(diffs, dtype=float)
    clusters = np.asarray(clusters)
    if diffs.shape != clusters.shape:
        raise ValueError(f"`diffs` shape {diffs.shape} does not match `clusters` {clusters.shape}.")

    per = cluster_means(diffs, clusters)  # one mean difference per cluster

    def dz(i: np.ndarray) -> float:
        sd = per[i].std(ddof=1)
        return float(per[i].mean() / sd) if sd > 0 else 0.0

    return {
        "mean": cluster_bootstrap(lambda i: diffs[i].mean(), [clusters], n_resamples, seed=seed),
        "d_z": cluster_bootstrap(dz, [np.arange(len(per))], n_resamples, seed=seed + 1),
    }


def predicted_side_share(diffs: np.ndarray, clusters: np.ndarray, predicted: str = "greater") -> dict:
    """How many clusters (requests) moved the predicted way: per-cluster mean difference > 0 ("greater")
    or < 0 ("less"; ties count against), with its 95% Wilson interval. Unlike a bootstrap of the mean,
    the interval keeps its width when every cluster moved the same way (8/8: [0.68, 1.00])."""
    if predicted not in ("greater", "less"):
        raise ValueError(f"`predicted` must be 'greater' or 'less', got {predicted!r}.")
    per = cluster_means(diffs, clusters)
    if not len(per):
        raise ValueError("`diffs` is empty: no cluster to count.")
    k = int((per > 0).sum() if predicted == "greater" else (per < 0).sum())
    lo, hi = wilson(k, len(per))
    return {"k": k, "n": len(per), "rate": k / len(per), "lo": lo, "hi": hi}


def decide(ci: dict, predicted: str = "greater", null: float = 0.0, smallest: float | None = None) -> str:
    """The fixed decision rule (module docstring) applied to an interval {"lo", "hi"}."""
    if predicted not in ("greater", "less"):
        raise ValueError(f"`predicted` must be 'greater' or 'less', got {predicted!r}.")
    lo, hi = ci["lo"], ci["hi"]
    if lo > null:
        return "supported" if predicted == "greater" else "contradicted"
    if hi < null:
        return "supported" if predicted == "less" else "contradicted"
    label = "not measurable on this model"
    if smallest is not None and null - smallest < lo and hi < null + smallest:
        label += f" (equivalent to zero within +/-{smallest:g})"
    return label


def instrument_valid(auroc_ci: dict, chance: float = 0.5) -> bool:
    """Whether an instrument separates labelled examples: the lower end of its AUROC interval is above chance."""
    return bool(auroc_ci["lo"] > chance)


def gate(verdict: str, auroc_ci: dict, instrument: str) -> str:
    """`verdict` when the instrument is valid (`instrument_valid`), else `instrument invalid` with the reason."""
    if instrument_valid(auroc_ci):
        return verdict
    return (
        f"{INVALID}: {instrument} labelled-pair AUROC {auroc_ci['mean']:.2f} "
        f"[{auroc_ci['lo']:.2f}, {auroc_ci['hi']:.2f}] does not lie above 0.5"
    )
