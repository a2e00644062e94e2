"""Tests of the reference HMoE (families/embtranslate/hmoe_lora.py): frozen base, tree, LoRA, routing, TC."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.embtranslate.config import LoRAHMoEConfig
from families.embtranslate.hmoe_lora import (
    LoRAHMoE,
    SeluMLP,
    TranslationConfidence,
    build_tree,
    direction_loss,
    local_loss,
    lora_parameters,
    with_lora,
)

SMALL = {"hidden_dim": 32, "layer_num": 2, "batch_size": 128}


def _clustered_pairs(n_per: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four well-separated source clusters, each translated by its own random linear map."""
    rng = np.random.default_rng(seed)
    centres = 6.0 * np.eye(4, 8)
    maps = rng.normal(size=(4, 8, 6))
    X = np.concatenate([c + rng.normal(size=(n_per, 8)) for c in centres])
    lab = np.repeat(np.arange(4), n_per)
    Y = np.einsum("nd,nde->ne", X, maps[lab]) / 8
    return X, Y, lab


def test_lora_copy_starts_at_the_frozen_base_and_trains_only_low_rank_factors() -> None:
    """B = 0 at initialisation, so the adapted model equals the base; only A and B are trainable."""
    base = SeluMLP(8, 6, 16, 3)
    m = with_lora(base, rank=4, alpha=8)
    x = torch.randn(10, 8)
    with torch.no_grad():
        torch.testing.assert_close(m(x), base(x))
    trainable = [p for p in m.parameters() if p.requires_grad]
    assert {id(p) for p in trainable} == {id(p) for p in lora_parameters(m)}
    assert sum(p.numel() for p in trainable) == sum(
        4 * (a + b) for a, b in ((8, 16), (16, 16), (16, 16), (16, 6))
    )


def test_tree_has_k_leaves_and_parents_cover_their_children() -> None:
    """3 levels, branching 2: 4 MiniBatchKMeans leaves, 2 parents, one root holding every anchor."""
    X, _, lab = _clustered_pairs()
    nodes, root = build_tree(X, LoRAHMoEConfig(**SMALL))
    assert len(nodes) == 7 and sum(n.level == 2 for n in nodes) == 4
    assert sorted(nodes[root].rows) == list(range(len(X)))
    for n in nodes:
        if n.children:
            assert sorted(n.rows) == sorted(np.concatenate([nodes[c].rows for c in n.children]))
    for n in nodes:  # well-separated clusters: each leaf is one planted cluster
        if n.level == 2:
            assert len(set(lab[n.rows])) == 1


def test_routing_descends_when_unambiguous_and_stops_between_children() -> None:
    """A point at a leaf centroid reaches that leaf; the midpoint of the two root children stays at the root."""
    X, Y, _ = _clustered_pairs()
    h = LoRAHMoE.fit(X, Y, LoRAHMoEConfig(**SMALL, base_steps=5, lora_steps=1))
    leaves = [i for i, n in enumerate(h.nodes) if not n.children]
    at_leaf = np.stack([h.nodes[i].centroid for i in leaves])
    assert list(h.route(at_leaf)) == leaves
    a, b = (h.nodes[c].centroid for c in h.nodes[h.root].children)
    assert list(h.route((a + b)[None] / 2)) == [h.root]
    assert list(h.variant(tau=1.0).route((a + b)[None] / 2))[0] in leaves  # tau = 1 always reaches a leaf


def test_node_adapters_beat_the_frozen_base_on_a_piecewise_map() -> None:
    """Per-cluster maps: the base alone underfits, the leaf adapters lower the held-out error."""
    X, Y, _ = _clustered_pairs(seed=1)
    Xt, Yt, _ = _clustered_pairs(n_per=30, seed=1)  # same maps and centres (same seed), fresh noise
    Xt = Xt + 0.3
    cfg = LoRAHMoEConfig(**SMALL, base_steps=150, base_lr=3e-3, lora_steps=150, lora_lr=3e-3, dir_weight=0.0)
    h = LoRAHMoE.fit(X, Y, cfg)

    def err(f) -> float:  # noqa: ANN001
        Yu = Yt / np.linalg.norm(Yt, axis=1, keepdims=True)
        return float(1 - (f(Xt) * Yu).sum(1).mean())

    assert err(h) < 0.8 * err(h.variant(adapters=False))


def test_local_loss_matches_its_definition_and_direction_loss_ignores_on_axis_residuals() -> None:
    """L_local = mean | ||f_i - f_j|| - ||y_i - y_j|| | over source neighbours; L_dir = 0 for residuals along u."""
    g = torch.Generator().manual_seed(0)
    x, p, y = (
        torch.randn(40, 5, generator=g),
        torch.randn(40, 3, generator=g),
        torch.randn(40, 3, generator=g),
    )
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    idx = d.topk(7, largest=False).indices
    direct = ((p[:, None] - p[idx]).norm(dim=-1) - (y[:, None] - y[idx]).norm(dim=-1)).abs().mean()
    torch.testing.assert_close(local_loss(p, y, x, 7), direct)
    u = torch.tensor([1.0, 0.0, 0.0])
    along = y + torch.randn(40, 1, generator=g) * u
    assert float(direction_loss(along, y, u, 1.0)) < 1e-6
    assert float(direction_loss(y + torch.tensor([0.0, 1.0, 0.0]), y, u, 2.0)) == pytest.approx(0.5)


def test_translation_confidence_is_one_on_training_points_and_falls_with_distance() -> None:
    """TC = exp(-d_NN / sigma) with sigma the mean pairwise distance of the training sources."""
    X = np.random.default_rng(0).normal(size=(50, 4))
    tc = TranslationConfidence.fit(X, pairs=20000)
    full = np.linalg.norm(X[:, None] - X[None], axis=-1)[~np.eye(50, dtype=bool)].mean()
    assert tc.sigma == pytest.approx(full, rel=0.03)
    np.testing.assert_allclose(tc.score(X), 1.0, atol=1e-6)
    far = X[:1] + np.array([[1.0, 0, 0, 0]]) * np.array([[0.5], [2.0], [8.0]])
    s = tc.score(far)
    assert s[0] > s[1] > s[2]
    assert s[2] == pytest.approx(np.exp(-tc.delta(far[2:])[0] / tc.sigma))


def test_reference_config_rejects_bad_values() -> None:
    """Bad hyper-parameters fail before any fitting."""
    with pytest.raises(ValueError, match="tau"):
        LoRAHMoEConfig(tau=1.5)
    with pytest.raises(ValueError, match="dir_channel"):
        LoRAHMoEConfig(dir_channel="u3")
    with pytest.raises(ValueError, match="branch_factor"):
        LoRAHMoEConfig(branch_factor=1)
    with pytest.raises(ValueError, match="at least 2"):
        TranslationConfidence.fit(np.ones((1, 3)))


def test_tau_calibration_uses_the_hierarchy_when_regions_differ() -> None:
    """Routing shares follow the root ratios exactly, and calibration on held-out pairs picks a tau that
    sends inputs below the root when the two halves of the source space need different maps."""
    from families.embtranslate.routing import calibrate_tau, root_ratios, routing_shares

    rng = np.random.default_rng(0)
    centers = np.array([[3.0] + [0.0] * 5, [-3.0] + [0.0] * 5])
    X = np.concatenate([c + 0.6 * rng.normal(size=(150, 6)) for c in centers])
    maps = [rng.normal(size=(6, 4)), rng.normal(size=(6, 4))]  # one linear map per region
    Y = np.concatenate([X[:150] @ maps[0], X[150:] @ maps[1]])
    val = rng.permutation(300)[:80]
    fit = np.setdiff1d(np.arange(300), val)
    cfg = LoRAHMoEConfig(hidden_dim=16, layer_num=1, base_steps=20, lora_steps=60, num_levels=2,
                         min_node_samples=10, local_weight=0.0, dir_weight=0.0, lora_lr=2e-2)  # fmt: skip
    h = LoRAHMoE.fit(X[fit], Y[fit], cfg)
    ratios = root_ratios(h, X[val])
    for tau in (0.0, float(np.median(ratios)), 1.0):  # known answer: the share with d1/d2 <= tau
        assert routing_shares(h.variant(tau=tau), X[val])["left_root"] == pytest.approx(
            (ratios <= tau).mean()
        )
    cal = calibrate_tau(h, X[val], Y[val])
    y_val = Y[val] / np.linalg.norm(Y[val], axis=1, keepdims=True)
    flat = float((h.variant(tau=0.0)(X[val]) * y_val).sum(1).mean())  # every input on the root adapter
    assert cal.left_root[cal.candidates.index(cal.tau)] > 0.5  # the chosen tau routes most inputs down
    assert max(cal.scores) > flat + 0.01  # and translates the held-out pairs better than the flat adapter
