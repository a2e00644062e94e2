"""Tests of BLCE / BLCE-G: update budget, Sherman-Morrison, separable regret, design, GLM, peers, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from families.blce import (
    BLCE,
    BLCEConfig,
    g_optimal_design,
    grid_size_bound,
    logistic_mle,
    sherman_morrison,
    static_grid,
)
from families.blce.baselines import LinUCB, MabwiserDisjointLinUCB, kron_arms
from families.blce.data import LinearContextualEnv, run_bandit, separable_env


@pytest.mark.parametrize("horizon", [16, 100, 1000, 10**4, 10**5, 10**7])
def test_grid_is_static_increasing_and_within_loglog_bound(horizon: int) -> None:
    """The grid ends at T, increases strictly, and has at most grid_size_bound(T) = O(log log T) intervals."""
    grid = static_grid(horizon)
    assert grid[-1] == horizon and all(b > a for a, b in zip(grid, grid[1:]))
    assert len(grid) <= grid_size_bound(horizon)


@pytest.mark.parametrize("design", ["uncertainty", "g_optimal", "strict_g"])
def test_number_of_updates_is_grid_size_minus_one(design: str) -> None:
    """A full run refits exactly once per interior grid point, never more."""
    T = 600
    env = LinearContextualEnv(num_arms=8, dim=3, seed=0)
    agent = BLCE(3, BLCEConfig(horizon=T, design=design, fw_iters=5))
    run_bandit(agent, env, T)
    assert agent.num_updates == len(static_grid(T)) - 1 <= grid_size_bound(T)


def test_strictly_batched_rule_ignores_the_interval_history_and_blce_does_not() -> None:
    """Same context and seed: after different within-interval plays, the strict rule picks the same arm,
    while BLCE's reward-free Gram update changes its max-uncertainty choice."""
    rng = np.random.default_rng(0)
    arms = rng.normal(size=(12, 4))
    history = np.repeat(arms[np.argmax((arms**2).sum(1))][None], 6, axis=0)  # the most uncertain arm, 6 times
    for design, should_match in (("strict_g", True), ("uncertainty", False)):
        fresh, played = (BLCE(4, BLCEConfig(horizon=1000, design=design, seed=3)) for _ in range(2))
        for x in history:  # still inside the first interval (grid[0] > 6), so no parameter update
            played.observe(x, 0.0)
        assert played.num_updates == 0
        matches = [fresh.select(arms) == played.select(arms) for _ in range(5)]
        assert all(matches) if should_match else not all(matches)


def test_sherman_morrison_equals_direct_inverse() -> None:
    """Rank-one updates (weighted, as in the GLM Gram) match np.linalg.inv to 1e-10."""
    rng = np.random.default_rng(0)
    d, lam = 6, 0.7
    inv, gram = np.eye(d) / lam, lam * np.eye(d)
    for _ in range(200):
        x, w = rng.standard_normal(d), rng.uniform(0.05, 1.0)
        inv = sherman_morrison(inv, x, w)
        gram += w * np.outer(x, x)
    np.testing.assert_allclose(inv, np.linalg.inv(gram), atol=1e-10)


def test_agent_gram_inverse_tracks_interval_data() -> None:
    """Inside an interval BLCE's H^-1 equals the inverse of lambda I + sum x x^T over that interval only."""
    T = 400
    agent = BLCE(3, BLCEConfig(horizon=T))
    env = LinearContextualEnv(num_arms=5, dim=3, seed=1)
    run_bandit(agent, env, static_grid(T)[0] + 10)  # 10 rounds into interval 2
    X = np.asarray(agent.xs)
    np.testing.assert_allclose(agent.gram_inv, np.linalg.inv(agent.ridge * np.eye(3) + X.T @ X), atol=1e-10)
    assert len(X) == 10


def test_regret_on_separable_instance_is_bounded() -> None:
    """Best arm 0.5 ahead: after the first three intervals every suboptimal arm is eliminated."""
    T = 3000
    agent = BLCE(3, BLCEConfig(horizon=T, noise_std=0.05))
    regret = run_bandit(agent, separable_env(dim=3, gap=0.5, seed=0), T)
    t3 = static_grid(T)[2]
    assert regret[t3:].sum() == 0.0  # constant regret from then on, whatever T is
    assert regret.sum() <= 0.5 * t3


def test_g_optimal_design_reaches_kiefer_wolfowitz_value() -> None:
    """At a near G-optimal design max_x ||x||^2_{A(pi)^-1} is close to d (Kiefer-Wolfowitz)."""
    rng = np.random.default_rng(0)
    arms = rng.standard_normal((40, 4))
    pi = g_optimal_design(arms, iters=500)
    A = (arms * pi[:, None]).T @ arms
    g = np.einsum("ij,jk,ik->i", arms, np.linalg.inv(A), arms)
    assert abs(pi.sum() - 1) < 1e-9 and g.max() <= 4 * 1.05


def test_logistic_mle_recovers_parameter() -> None:
    """Newton MLE of the GLM extension recovers theta* from 20k Bernoulli draws."""
    rng = np.random.default_rng(0)
    theta = np.array([1.5, -2.0, 0.5])
    X = rng.standard_normal((20000, 3))
    r = (rng.uniform(size=20000) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    np.testing.assert_allclose(logistic_mle(X, r, ridge=1.0), theta, atol=0.1)


def test_glm_variant_runs_and_learns() -> None:
    """BGLE on logistic rewards: late-round regret is below early-round regret."""
    T = 1500
    env = LinearContextualEnv(num_arms=20, dim=3, glm=True, theta_norm=3.0, seed=0)
    agent = BLCE(3, BLCEConfig(horizon=T, glm=True, width_scale=0.3, explore_frac=0.2))
    regret = run_bandit(agent, env, T)
    assert regret[-300:].mean() < regret[:100].mean()


def test_linucb_equals_mabwiser_on_disjoint_problem() -> None:
    """Our LinUCB with a fixed width on block features picks the same arms as mabwiser's LinUCB."""
    pytest.importorskip("mabwiser", reason="peer comparison needs mabwiser")
    K, d, T = 4, 3, 120
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((K, d))
    ours, peer = LinUCB(K * d, T, width=1.0), MabwiserDisjointLinUCB(K, d, alpha=1.0)
    for t in range(T):
        arms = kron_arms(rng.standard_normal(d), K)
        a = t if t < K else ours.select(arms)  # both warm up by pulling each arm once
        assert a == (t if t < K else peer.select(arms))
        r = float(theta[a] @ arms[a, a * d : (a + 1) * d] + 0.1 * rng.standard_normal())
        ours.observe(arms[a], r)
        peer.observe(arms[a], r)


def test_rarely_switching_and_fixed_batch_update_counts() -> None:
    """RS-OFUL updates O(d log T) times; fixed batches update T / b times."""
    T, d = 2000, 4
    env = LinearContextualEnv(num_arms=10, dim=d, seed=0)
    rs = LinUCB(d, T, refresh="det")
    run_bandit(rs, env, T)
    fb = LinUCB(d, T, refresh=250)
    run_bandit(fb, env, T)
    assert rs.num_updates <= 2 * d * np.log2(T) and fb.num_updates == T // 250


def test_bad_inputs_raise() -> None:
    """Invalid configs, arm shapes, NaNs and playing past the horizon fail with clear messages."""
    with pytest.raises(ValueError, match="design"):
        BLCEConfig(design="greedy")
    with pytest.raises(ValueError, match="explore_frac"):
        BLCEConfig(explore_frac=1.0)
    with pytest.raises(ValueError, match="horizon"):
        BLCEConfig(horizon=3)
    agent = BLCE(2, BLCEConfig(horizon=16))
    with pytest.raises(ValueError, match=r"\(K, 2\)"):
        agent.select(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN"):
        agent.select(np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="finite"):
        agent.observe(np.zeros(2), float("nan"))
    run_bandit(agent, LinearContextualEnv(3, 2, seed=0), 16)
    with pytest.raises(ValueError, match="rounds are played"):
        agent.select(np.ones((3, 2)))
    with pytest.raises(ValueError, match="refresh"):
        LinUCB(2, 10, refresh="never")


def test_demo_quick_smoke(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    """The demo's --quick mode runs end to end and writes its results."""
    from families.blce.demo import main

    assert main(["--quick", "--seeds", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").exists() and (tmp_path / "blce_regret.png").exists()
    from families.demo_cli import load_results

    rows = load_results(tmp_path)["regret"]["tables"]["K=10, d=5"]
    assert all(n == len(static_grid(600)) - 1 for n in rows["BLCE (widths x0.1, c=0.1)"]["updates"])
    assert 0.0 <= rows["strictly batched G-design (widths x0.1, c=0.1)"]["regret"][0] <= 600.0
