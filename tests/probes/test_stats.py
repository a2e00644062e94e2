"""Cluster bootstrap: covers a planted effect at about the nominal rate; the row bootstrap does not."""

from __future__ import annotations

import numpy as np
import pytest

from probes.stats import cluster_bootstrap, decide, paired_effect, predicted_side_share

REPS = 200


def _clustered(rng: np.random.Generator, n_clusters: int = 30, per: int = 4, effect: float = 0.3):
    """Rows sharing a cluster share a large random offset (ICC ~0.9), as requests under several cues do."""
    c = np.repeat(np.arange(n_clusters), per)
    x = effect + rng.normal(0, 1.0, n_clusters)[c] + rng.normal(0, 0.3, c.size)
    return x, c


def test_cluster_bootstrap_covers_planted_mean_at_nominal_rate():
    """>= 90% of 200 synthetic repetitions cover the true mean at 95%; resampling rows instead covers
    far less often (the intervals the clustering fixes)."""
    rng = np.random.default_rng(1)
    hits_cluster = hits_rows = 0
    for rep in range(REPS):
        x, c = _clustered(rng)
        ci = cluster_bootstrap(lambda i, x=x: x[i].mean(), [c], n_resamples=200, seed=rep)
        hits_cluster += ci["lo"] <= 0.3 <= ci["hi"]
        naive = cluster_bootstrap(lambda i, x=x: x[i].mean(), [np.arange(len(x))], n_resamples=200, seed=rep)
        hits_rows += naive["lo"] <= 0.3 <= naive["hi"]
    assert hits_cluster / REPS >= 0.90, hits_cluster
    assert hits_rows / REPS < 0.80, hits_rows


def test_refit_inside_bootstrap_covers_planted_shift():
    """A direction refit on resampled contrast pairs and a paired shift over resampled requests (two
    samples, resampled independently) cover the planted shift in contrast units (0.4) at >= 90%."""
    rng = np.random.default_rng(2)
    dim, n_pairs, n_req, sep, shift = 4, 40, 40, 4.0, 0.4 * 4.0
    d = np.eye(dim)[0]
    pair, label = np.repeat(np.arange(n_pairs), 2), np.tile([1, 0], n_pairs)
    hits = 0
    for rep in range(REPS):
        X = rng.normal(0, 1.0, (n_pairs, dim))[pair] + np.outer(label - 0.5, d) * sep
        X += rng.normal(0, 0.5, X.shape)
        base = rng.normal(0, 2.0, (n_req, dim))  # request offsets: large, cancel within a request
        S0 = base + rng.normal(0, 0.5, base.shape)
        S1 = base + shift * d + rng.normal(0, 0.5, base.shape)

        def z_shift(ci: np.ndarray, ri: np.ndarray, X=X, S0=S0, S1=S1) -> float:
            Xi, yi = X[ci], label[ci]
            u = Xi[yi == 1].mean(0) - Xi[yi == 0].mean(0)
            u /= np.linalg.norm(u)
            span = (Xi[yi == 1] @ u).mean() - (Xi[yi == 0] @ u).mean()
            return float(((S1[ri] - S0[ri]) @ u).mean() / span)

        ci = cluster_bootstrap(z_shift, [pair, np.arange(n_req)], n_resamples=200, seed=rep)
        hits += ci["lo"] <= 0.4 <= ci["hi"]
    assert hits / REPS >= 0.90, hits


def test_paired_effect_reports_dz_with_interval():
    """d_z is the mean of per-cluster differences over their sd; a planted d_z of 1 lands in its CI."""
    rng = np.random.default_rng(3)
    per_cluster = rng.normal(1.0, 1.0, 80)
    c = np.repeat(np.arange(80), 3)
    out = paired_effect(per_cluster[c], c, n_resamples=400)
    assert out["mean"]["n_clusters"] == 80
    assert out["d_z"]["lo"] < 1.0 < out["d_z"]["hi"]
    assert out["d_z"]["mean"] == pytest.approx(per_cluster.mean() / per_cluster.std(ddof=1))


def test_decision_rule_labels():
    assert decide({"lo": 0.1, "hi": 0.3}) == "supported"
    assert decide({"lo": -0.3, "hi": -0.1}) == "contradicted"
    assert decide({"lo": -0.3, "hi": -0.1}, predicted="less") == "supported"
    assert decide({"lo": -0.3, "hi": 0.2}) == "not measurable on this model"
    assert "equivalent to zero" in decide({"lo": -0.05, "hi": 0.04}, smallest=0.1)


def test_cluster_bootstrap_rejects_one_cluster():
    with pytest.raises(ValueError, match="at least two clusters"):
        cluster_bootstrap(lambda i: 0.0, [np.zeros(5)])


def test_predicted_side_share_counts_clusters_and_keeps_width():
    """Known answers: 8 of 8 requests moved up gives Wilson [0.676, 1.0] (a bootstrap of the mean would be
    zero-width); a tie counts against; a request's two prompts are averaged before it is counted."""
    up = predicted_side_share(np.ones(8), np.arange(8))
    assert (up["k"], up["n"]) == (8, 8) and up["lo"] == pytest.approx(0.6756, abs=1e-3) and up["hi"] == 1.0
    assert predicted_side_share(np.ones(8), np.arange(8), "less")["k"] == 0
    diffs = np.array([1.0, -3.0, 0.0, 0.0, 2.0, 2.0, -1.0, -1.0])  # requests: -1 | 0 | +2 | -1
    share = predicted_side_share(diffs, np.repeat(np.arange(4), 2), "less")
    assert (share["k"], share["n"]) == (2, 4)
    assert predicted_side_share(diffs, np.repeat(np.arange(4), 2))["k"] == 1
    with pytest.raises(ValueError, match="predicted"):
        predicted_side_share(diffs, np.arange(8), "up")
