"""Reading directions out of activations and scoring them.

Three estimators on (N, D) activations X with binary labels y (1 = positive concept):

* difference of means `mean(X | y=1) - mean(X | y=0)` (CAA, Nguyen et al. 2025, Marks & Tegmark);
* logistic regression on standardised features, mapped back to activation space by dividing the
  coefficients by the feature scales (Goldowsky-Dill et al. 2025);
* PCA of paired differences (RepE / repeng `pca_diff`): the top right-singular vector of the
  *uncentred* per-pair differences, sign fixed so positives project higher. Uncentred because
  centring would remove exactly the mean difference we are after when pairs agree.

Metrics: AUROC (rank statistic, ties counted half), TPR at a fixed FPR (default 1%), stratified
bootstrap confidence intervals. `layer_scan` does a grouped train/test split (pairs never straddle
the split) and scores each layer on the held-out part.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from probes.activations import ActivationSet

__all__ = [
    "METHODS",
    "auroc",
    "bootstrap_ci",
    "check_labels",
    "cosine",
    "diff_of_means",
    "evaluate_scores",
    "fit_direction",
    "grouped_split",
    "layer_scan",
    "logistic_direction",
    "pca_paired_direction",
    "plot_layer_curves",
    "random_cosine_null",
    "split_half_cosine",
    "tpr_at_fpr",
    "unit",
]

log = logging.getLogger(__name__)
METHODS = ("diffmean", "logistic", "pca")


def check_labels(X: np.ndarray, y: np.ndarray, min_per_class: int = 2, max_ratio: float = 9.0) -> tuple:
    """Validate (N, D) activations and binary labels; returns float64 X and int y.

    Raises on empty data, NaN/inf, shape mismatch, non-binary labels, a class with fewer than
    `min_per_class` items, or a majority/minority ratio above `max_ratio` (a probe on a 95/5 split
    reports a misleading AUROC from a handful of positives: rebalance, or raise `max_ratio`).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(
            f"activations must be a non-empty (N, D) array, got shape {X.shape}: the contrast set is empty."
        )
    if not np.isfinite(X).all():
        raise ValueError("activations contain NaN or inf; recapture in float32 or drop the broken rows.")
    if y.shape != (X.shape[0],):
        raise ValueError(f"labels shape {y.shape} does not match {X.shape[0]} activation rows.")
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise ValueError(f"labels must be binary 0/1, got values {np.unique(y)[:5].tolist()}.")
    y = y.astype(int)
    n_pos, n_neg = int(y.sum()), int((1 - y).sum())
    if min(n_pos, n_neg) < min_per_class:
        raise ValueError(
            f"unbalanced labels: {n_pos} positives and {n_neg} negatives; each class needs at least "
            f"{min_per_class}. Add contrast items of the missing class."
        )
    if max(n_pos, n_neg) / min(n_pos, n_neg) > max_ratio:
        raise ValueError(
            f"unbalanced labels: {n_pos} positives vs {n_neg} negatives exceeds `max_ratio`={max_ratio}; "
            "subsample the majority class or pass a larger `max_ratio`."
        )
    return X, y


def unit(v: np.ndarray) -> np.ndarray:
    """v / |v|; raises on a zero vector (no direction to speak of)."""
    norm = float(np.linalg.norm(v))
    if norm == 0 or not np.isfinite(norm):
        raise ValueError("direction has zero or non-finite norm: the two classes have identical means.")
    return v / norm


def diff_of_means(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """mean(X | y=1) - mean(X | y=0), shape (D,), not normalised (its norm is the class separation)."""
    X, y = check_labels(X, y, min_per_class=1, max_ratio=np.inf)
    return X[y == 1].mean(0) - X[y == 0].mean(0)


def logistic_direction(X: np.ndarray, y: np.ndarray, C: float = 1.0, seed: int = 0) -> np.ndarray:
    """Weight vector (D,) of an L2 logistic-regression probe, in raw activation coordinates."""
    from sklearn.linear_model import LogisticRegression

    if C <= 0:
        raise ValueError(f"`C` must be > 0, got {C}.")
    X, y = check_labels(X, y, min_per_class=1, max_ratio=np.inf)
    mu, sd = X.mean(0), X.std(0)
    sd = np.where(sd > 1e-8, sd, 1.0)
    clf = LogisticRegression(C=C, max_iter=2000, random_state=seed).fit((X - mu) / sd, y)
    return clf.coef_[0] / sd


def pca_paired_direction(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Top principal direction (unit, (D,)) of per-group differences mean(pos) - mean(neg)."""
    X, y = check_labels(X, y, min_per_class=1, max_ratio=np.inf)
    groups = np.asarray(groups)
    if groups.shape != y.shape:
        raise ValueError(f"`groups` shape {groups.shape} does not match labels {y.shape}.")
    diffs = []
    for g in np.unique(groups):
        sel = groups == g
        if y[sel].min() == 0 and y[sel].max() == 1:
            diffs.append(X[sel & (y == 1)].mean(0) - X[sel & (y == 0)].mean(0))
    if not diffs:
        raise ValueError(
            "no group holds both a positive and a negative item: PCA of paired differences needs pairs."
        )
    D = np.stack(diffs)  # (P, D)
    _, _, vt = np.linalg.svd(D, full_matrices=False)
    v = vt[0]
    return v if (D @ v).mean() >= 0 else -v


def fit_direction(method: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Unit direction by `method` ("diffmean", "logistic", "pca"; pca needs `groups`)."""
    if method == "diffmean":
        return unit(diff_of_means(X, y))
    if method == "logistic":
        return unit(logistic_direction(X, y))
    if method == "pca":
        if groups is None:
            raise ValueError("method 'pca' needs `groups` (pair ids) to form paired differences.")
        return unit(pca_paired_direction(X, y, groups))
    raise ValueError(f"unknown direction `method`={method!r}: use one of {METHODS}.")


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve = P(score_pos > score_neg) + 0.5 P(tie): the Mann-Whitney U over tie-averaged
    ranks (`scipy.stats.rankdata`). Equals scikit-learn's `roc_auc_score` (tested), which costs ~60x more
    per call in validation (23 ms vs 0.4 ms on 64 scores), too slow inside a bootstrap."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(labels).astype(int) == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUROC needs at least one positive and one negative score.")
    u = rankdata(s)[pos].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr: float = 0.01) -> float:
    """True-positive rate at the threshold that lets at most floor(fpr * n_neg) negatives through.

    With fewer than 1/fpr negatives this means zero false positives: positives must beat every negative.
    """
    if not 0 <= fpr < 1:
        raise ValueError(f"`fpr` must be in [0, 1), got {fpr}.")
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(int)
    pos, neg = s[y == 1], np.sort(s[y == 0])[::-1]
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("TPR@FPR needs at least one positive and one negative score.")
    k = int(np.floor(fpr * len(neg)))
    return float((pos > neg[k]).mean())


def bootstrap_ci(
    fn: Callable[[np.ndarray, np.ndarray], float],
    scores: np.ndarray,
    labels: np.ndarray,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile CI of `fn(scores, labels)` under a stratified bootstrap: `scipy.stats.bootstrap` resamples
    the positives and the negatives separately (two independent samples)."""
    from scipy import stats

    if n_boot < 1:
        raise ValueError(f"`n_boot` must be >= 1, got {n_boot}.")
    y = np.asarray(labels).astype(int)
    s = np.asarray(scores, dtype=np.float64)
    pos, neg = s[y == 1], s[y == 0]
    if min(len(pos), len(neg)) < 2:
        raise ValueError("the stratified bootstrap needs at least two positive and two negative scores.")

    def statistic(p: np.ndarray, n: np.ndarray) -> float:
        return fn(np.concatenate([p, n]), np.r_[np.ones(len(p), int), np.zeros(len(n), int)])

    res = stats.bootstrap(
        (pos, neg),
        statistic,
        n_resamples=n_boot,
        vectorized=False,
        paired=False,
        confidence_level=level,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def evaluate_scores(scores: np.ndarray, labels: np.ndarray, n_boot: int = 200, seed: int = 0) -> dict:
    """AUROC and TPR@1%FPR with 95% bootstrap CIs."""
    return {
        "auroc": auroc(scores, labels),
        "auroc_ci": bootstrap_ci(auroc, scores, labels, n_boot, seed),
        "tpr_at_1pct_fpr": tpr_at_fpr(scores, labels, 0.01),
        "tpr_ci": bootstrap_ci(lambda s, y: tpr_at_fpr(s, y, 0.01), scores, labels, n_boot, seed + 1),
        "n_pos": int(np.sum(labels)),
        "n_neg": int(len(labels) - np.sum(labels)),
    }


def grouped_split(
    groups: np.ndarray, test_frac: float = 0.5, seed: int = 0, strata: np.ndarray | None = None
) -> np.ndarray:
    """Boolean test mask that keeps every group (e.g. a contrast pair) on one side of the split.

    With `strata` (one label per item), groups are split within each stratum, so a nuisance balanced in
    the full set (e.g. which A/B letter the user favours) stays balanced in train and test.
    """
    if not 0 < test_frac < 1:
        raise ValueError(f"`test_frac` must be in (0, 1), got {test_frac}.")
    groups = np.asarray(groups)
    strata = np.zeros(len(groups), int) if strata is None else np.asarray(strata)
    if strata.shape != groups.shape:
        raise ValueError(f"`strata` shape {strata.shape} does not match `groups` {groups.shape}.")
    if len(np.unique(groups)) < 2:
        raise ValueError("need at least two groups to split into train and test.")
    rng = np.random.default_rng(seed)
    test_groups = []
    for st in np.unique(strata):
        uniq = np.unique(groups[strata == st])
        n_test = min(len(uniq) - 1, max(1, int(round(test_frac * len(uniq))))) if len(uniq) > 1 else 0
        test_groups.extend(rng.choice(uniq, n_test, replace=False).tolist())
    return np.isin(groups, test_groups)


def layer_scan(
    aset: ActivationSet,
    labels: np.ndarray,
    method: str = "diffmean",
    groups: np.ndarray | None = None,
    test_frac: float = 0.5,
    n_boot: int = 200,
    seed: int = 0,
) -> list[dict]:
    """Per layer: fit a direction on the train split, score the held-out split (AUROC, TPR@1%FPR, CIs).

    Returns one dict per layer with the unit `direction` (D,) fitted on the train split.
    """
    labels = np.asarray(labels).astype(int)
    if groups is None:
        groups = np.arange(len(labels))
    groups = np.asarray(groups)
    test = grouped_split(groups, test_frac, seed)
    rows = []
    for layer in aset.layers:
        X = aset.acts[layer]
        check_labels(X[~test], labels[~test])
        check_labels(X[test], labels[test], min_per_class=1, max_ratio=np.inf)
        d = fit_direction(method, X[~test], labels[~test], groups[~test])
        scores = X[test] @ d
        row = {"layer": layer, "method": method, **evaluate_scores(scores, labels[test], n_boot, seed)}
        row["direction"] = d
        rows.append(row)
    return rows


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors."""
    return float(np.dot(unit(np.asarray(a, float)), unit(np.asarray(b, float))))


def split_half_cosine(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None = None,
    n_splits: int = 20,
    seed: int = 0,
    strata: np.ndarray | None = None,
) -> tuple[float, float]:
    """Reliability ceiling: cosine between diff-of-means directions of two random halves (mean, std).

    Halves are drawn by `groups` (pair ids) when given: splitting paired items independently would
    compare prompt identities instead of the concept. `strata` (one label per item, e.g. which A/B
    letter the user favours) are halved separately, so a nuisance that cancels in the full set also
    cancels in each half. Two concepts whose cross-cosine reaches this ceiling cannot be told apart at
    this sample size.
    """
    X, y = check_labels(X, y, min_per_class=4)
    groups = np.arange(len(y)) if groups is None else np.asarray(groups)
    if groups.shape != y.shape:
        raise ValueError(f"`groups` shape {groups.shape} does not match labels {y.shape}.")
    strata = np.zeros(len(y), int) if strata is None else np.asarray(strata)
    if strata.shape != y.shape:
        raise ValueError(f"`strata` shape {strata.shape} does not match labels {y.shape}.")
    rng = np.random.default_rng(seed)
    by_stratum = [np.unique(groups[strata == st]) for st in np.unique(strata)]
    vals = []
    for _ in range(n_splits * 5):
        chosen = np.concatenate([rng.permutation(u)[: len(u) // 2] for u in by_stratum])
        half = np.isin(groups, chosen)
        if min(y[half].sum(), (1 - y[half]).sum(), y[~half].sum(), (1 - y[~half]).sum()) == 0:
            continue  # a half without one class has no direction
        a = X[half & (y == 1)].mean(0) - X[half & (y == 0)].mean(0)
        b = X[~half & (y == 1)].mean(0) - X[~half & (y == 0)].mean(0)
        vals.append(cosine(a, b))
        if len(vals) == n_splits:
            break
    if not vals:
        raise ValueError("no split put both classes in both halves: add more groups.")
    return float(np.mean(vals)), float(np.std(vals))


def random_cosine_null(dim: int, n: int = 1000, seed: int = 0) -> float:
    """95th percentile of |cos| between random Gaussian directions in `dim` dimensions (~2/sqrt(dim))."""
    if dim < 2:
        raise ValueError(f"`dim` must be >= 2, got {dim}.")
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, dim)), rng.standard_normal((n, dim))
    c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return float(np.quantile(np.abs(c), 0.95))


def plot_layer_curves(
    curves: dict[str, list[dict]], path: str | Path, metric: str = "auroc", title: str = ""
) -> Path:
    """Line plot of `metric` per layer for each named scan, with CI bands where present."""
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.6), extra="probes")
    for name, rows in curves.items():
        xs = [r["layer"] for r in rows]
        ax.plot(xs, [r[metric] for r in rows], marker="o", label=name)
        ci = f"{metric}_ci" if f"{metric}_ci" in rows[0] else ("tpr_ci" if metric.startswith("tpr") else None)
        if ci and ci in rows[0]:
            ax.fill_between(xs, [r[ci][0] for r in rows], [r[ci][1] for r in rows], alpha=0.2)
    ax.set_xlabel("layer")
    ax.set_ylabel(metric)
    if metric == "auroc":
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    save_figure(fig, path, dpi=110)
    return path
