"""Directions and probe metrics: exact diff-of-means, planted-direction recovery, metrics, bad input."""

import numpy as np
import pytest
import torch

from probes.activations import ActivationSet, capture_items
from probes.data import af_scenarios
from probes.directions import (
    auroc,
    bootstrap_ci,
    check_labels,
    cosine,
    diff_of_means,
    fit_direction,
    layer_scan,
    random_cosine_null,
    split_half_cosine,
    tpr_at_fpr,
)


def _planted(n=80, d=32, strength=6.0, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    y = np.repeat([0, 1], n // 2)
    groups = np.tile(np.arange(n // 2), 2)
    X = rng.standard_normal((n, d)) + strength * y[:, None] * v
    return X, y, groups, v


def test_diff_of_means_equals_numpy_on_captured_activations(probe_model):
    """diff_of_means on capture_items output == numpy mean difference of the raw m.capture tensors."""
    m, _ = probe_model
    items = af_scenarios(n=2, assertions=("none",), researcher=(False,))  # 2 requests x 2 cues
    aset = capture_items(m, items, [1], "last", batch_size=3)
    texts = [
        m.tokenizer.apply_chat_template(it.messages, tokenize=False, add_generation_prompt=True)
        for it in items
    ]
    raw = []
    for t in texts:  # one prompt at a time: no padding at all
        with m.capture([1]) as acts:
            m.prefill(**m.encode([t]))
        raw.append(acts[1][0][0, -1].double().numpy())
    raw = np.stack(raw)
    y = (aset.column("cue") == "training").astype(int)
    expected = raw[y == 1].mean(0) - raw[y == 0].mean(0)
    np.testing.assert_allclose(diff_of_means(aset.acts[1], y), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", ["diffmean", "logistic", "pca"])
def test_planted_direction_is_recovered(method):
    """A direction planted in Gaussian activations is found (cos > 0.8) and separates held-out data (AUROC ~1)."""
    X, y, g, v = _planted()
    d = fit_direction(method, X, y, g)
    assert abs(cosine(d, v)) > 0.8
    aset = ActivationSet({0: X.astype(np.float32)}, [{} for _ in y], "last")
    row = layer_scan(aset, y, method, g, n_boot=50)[0]
    assert row["auroc"] > 0.98
    assert row["auroc_ci"][0] > 0.9


def test_no_signal_gives_chance_auroc():
    """Without a planted direction the held-out AUROC stays near 0.5 (the scan can fail)."""
    X, y, g, _ = _planted(n=200, strength=0.0, seed=3)
    aset = ActivationSet({0: X.astype(np.float32)}, [{} for _ in y], "last")
    assert 0.3 < layer_scan(aset, y, "diffmean", g, n_boot=20)[0]["auroc"] < 0.7


def test_auroc_and_tpr_by_hand():
    """AUROC counts ties as half; TPR@FPR uses the strictest threshold when negatives are few."""
    s = np.array([0.9, 0.5, 0.5, 0.1])
    y = np.array([1, 1, 0, 0])
    assert auroc(s, y) == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert tpr_at_fpr(s, y, 0.01) == pytest.approx(0.5)  # only 0.9 beats the top negative 0.5
    sk = pytest.importorskip("sklearn.metrics", reason="cross-check against scikit-learn")
    rng = np.random.default_rng(0)
    s2, y2 = rng.standard_normal(50), np.repeat([0, 1], 25)
    assert auroc(s2, y2) == pytest.approx(sk.roc_auc_score(y2, s2))


def test_bootstrap_ci_brackets_estimate_and_split_half():
    """The CI contains the point AUROC; split-half reliability is ~1 for a strong planted direction."""
    X, y, g, v = _planted(strength=8.0)
    s = X @ v
    lo, hi = bootstrap_ci(auroc, s, y, n_boot=100)
    assert lo <= auroc(s, y) <= hi
    assert split_half_cosine(X, y, g, n_splits=5)[0] > 0.9
    assert 0.2 < random_cosine_null(32) < 0.5


def test_bad_inputs_raise_clear_errors(probe_model):
    """Layer out of range, empty contrast set, unbalanced labels, NaNs: ValueError naming the problem."""
    m, _ = probe_model
    with pytest.raises(ValueError, match="out of range"):
        capture_items(m, af_scenarios(n=1), [99])
    with pytest.raises(ValueError, match="empty"):
        capture_items(m, [], [0])
    with pytest.raises(ValueError, match="empty"):
        diff_of_means(np.zeros((0, 4)), np.zeros(0))
    with pytest.raises(ValueError, match="unbalanced"):
        check_labels(np.ones((20, 3)), np.array([1] + [0] * 19))
    with pytest.raises(ValueError, match="unbalanced"):
        check_labels(np.ones((5, 3)), np.ones(5, int))
    bad = np.ones((4, 3))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        diff_of_means(bad, np.array([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="NaN"):
        ActivationSet({0: bad.astype(np.float32)}, [{}] * 4, "last")
    with pytest.raises(ValueError, match="binary"):
        check_labels(np.ones((4, 3)), np.array([0, 1, 2, 1]))
    with pytest.raises(ValueError, match="method"):
        fit_direction("svm", np.ones((4, 3)), np.array([0, 0, 1, 1]))


def test_activation_set_round_trip(tmp_path, probe_model):
    """save/load keeps activations and metadata; answer and mean_response positions work."""
    m, _ = probe_model
    from probes.data import sycophancy_opinion

    items = sycophancy_opinion(2)
    aset = capture_items(m, items, [0, "model.layers.1"], "answer")
    back = ActivationSet.load(aset.save(tmp_path / "a.pt"))
    assert back.layers == [0, 1] and back.meta == aset.meta
    np.testing.assert_array_equal(back.acts[1], aset.acts[1])
    gen = capture_items(m, items[:2], [1], "mean_response", max_new_tokens=3)
    assert gen.acts[1].shape == (2, m.hidden_size) and "response" in gen.meta[0]
    with pytest.raises(ValueError, match="answer"):
        capture_items(m, af_scenarios(n=1), [0], "answer")
    assert torch.isfinite(torch.from_numpy(gen.acts[1])).all()


def test_split_half_strata_cancel_a_balanced_nuisance():
    """A nuisance that cancels over the full set (A/B letter) but not in random halves is neutralised by strata."""
    rng = np.random.default_rng(1)
    d, n = 32, 40  # n pairs
    v, nuisance = rng.standard_normal(d), 10 * rng.standard_normal(d)
    view = np.repeat([1, -1], n // 2)  # which letter the user favours
    pos = rng.standard_normal((n, d)) + v + view[:, None] * nuisance / 2
    neg = rng.standard_normal((n, d)) - view[:, None] * nuisance / 2
    X, y = np.concatenate([pos, neg]), np.repeat([1, 0], n)
    g, strata = np.tile(np.arange(n), 2), np.tile(view, 2)
    plain = split_half_cosine(X, y, g, n_splits=10)[0]
    stratified = split_half_cosine(X, y, g, n_splits=10, strata=strata)[0]
    assert stratified > 0.5 > plain


def test_auroc_and_bootstrap_match_the_libraries():
    """auroc equals scikit-learn's roc_auc_score with ties; bootstrap_ci brackets the point estimate."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from probes.directions import auroc, bootstrap_ci

    rng = np.random.default_rng(0)
    y = (rng.random(60) > 0.4).astype(int)
    s = (rng.normal(size=60) + y).round(1)  # rounding makes ties
    assert abs(auroc(s, y) - roc_auc_score(y, s)) < 1e-12
    lo, hi = bootstrap_ci(auroc, s, y, n_boot=100, seed=1)
    assert lo < auroc(s, y) < hi and 0 <= lo < hi <= 1
