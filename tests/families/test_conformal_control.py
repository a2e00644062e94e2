"""Tests of conformal policy control: risk guarantee, beta = 0, rejection sampler, baselines, bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from families.conformal_control import (
    ConformalControlConfig,
    ConformalPolicyController,
    ConstrainedPolicy,
    calibrate_beta,
    estimate_psi,
    fixed_sequence_select,
    weighted_bound,
)
from families.conformal_control.baselines import crc_bounds, crc_mapie, crc_textbook, ltt_mapie
from families.conformal_control.data import EhrlichLikeProblem, MarkovChainPolicy, configuration_losses
from families.conformal_control.model import calibrate_beta_sequential


def _tiny_chains(seed: int = 0) -> tuple[MarkovChainPolicy, MarkovChainPolicy]:
    """Two length-3 chains over 3 tokens: 27 sequences, small enough to enumerate exactly."""
    rng = np.random.default_rng(seed)
    safe = MarkovChainPolicy(rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3), size=(2, 3)))
    opt = MarkovChainPolicy(rng.dirichlet(np.ones(3) * 0.5), rng.dirichlet(np.ones(3) * 0.5, size=(2, 3)))
    return safe, opt


def _all_sequences() -> np.ndarray:
    return np.array(list(itertools.product(range(3), repeat=3)))


def test_rejection_sampler_matches_target_distribution_chi_square() -> None:
    """Samples of pi_beta from both proposal branches pass a chi-square test against the exact pmf."""
    safe, opt = _tiny_chains()
    xs = _all_sequences()
    p0, pt = np.exp(safe.log_prob(xs)), np.exp(opt.log_prob(xs))
    rng = np.random.default_rng(1)
    for beta in (0.4, 2.5):  # beta < 1 proposes from pi_0, beta >= 1 from pi_t
        target = np.minimum(pt, beta * p0)
        target /= target.sum()
        psi = float(np.minimum(pt, beta * p0).sum())  # exact normalizer on this tiny space
        pol = ConstrainedPolicy(safe, opt, beta, psi)
        draws = pol.sample(6000, rng)
        idx = (draws * np.array([9, 3, 1])).sum(axis=1)
        counts = np.bincount(idx, minlength=27)
        assert stats.chisquare(counts, 6000 * target).pvalue > 1e-3
        np.testing.assert_allclose(np.exp(pol.log_prob(xs)), target, rtol=1e-10)


def test_beta_zero_reproduces_safe_policy() -> None:
    """beta = 0 gives pi_0's likelihoods and pi_0's samples; a tiny alpha returns beta = 0."""
    safe, opt = _tiny_chains()
    xs = _all_sequences()
    pol = ConstrainedPolicy(safe, opt, 0.0, 0.0)
    np.testing.assert_allclose(pol.log_prob(xs), safe.log_prob(xs))
    a = pol.sample(50, np.random.default_rng(3))
    b = safe.sample(50, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(0)
    cal = safe.sample(300, rng)
    losses = (cal[:, 0] == 0).astype(float)  # some risk exists under pi_0 already
    ctrl = ConformalPolicyController(safe, opt, ConformalControlConfig(alpha=1e-3, num_proposals=200))
    assert ctrl.calibrate(cal, losses, rng).beta == 0.0 and not ctrl.calibration.certified


def test_psi_estimate_matches_exact_normalizer() -> None:
    """Importance-weighted psi(beta) agrees with the enumerated sum of min(pi_t, beta pi_0)."""
    safe, opt = _tiny_chains()
    xs = _all_sequences()
    p0, pt = np.exp(safe.log_prob(xs)), np.exp(opt.log_prob(xs))
    rng = np.random.default_rng(0)
    s, o = safe.sample(20000, rng), opt.sample(20000, rng)
    lr_s, lr_o = opt.log_prob(s) - safe.log_prob(s), opt.log_prob(o) - safe.log_prob(o)
    for beta in (0.3, 1.0, 3.0):
        exact = float(np.minimum(pt, beta * p0).sum())
        assert abs(estimate_psi(beta, lr_s, lr_o) - exact) < 0.02
    assert estimate_psi(math.inf, lr_s) == 1.0 and estimate_psi(0.0, lr_s) == 0.0


def test_max_log_ratio_dynamic_program_equals_enumeration() -> None:
    """The Viterbi supremum of log(pi_t / pi_0) equals brute force over all 27 sequences."""
    safe, opt = _tiny_chains(2)
    xs = _all_sequences()
    brute = float((opt.log_prob(xs) - safe.log_prob(xs)).max())
    assert math.isclose(opt.max_log_ratio_over(safe), brute, rel_tol=1e-12)


def test_realised_risk_below_alpha_over_many_seeds() -> None:
    """Mean true risk of pi_beta_hat over 150 calibrations is <= alpha + 3 Monte Carlo SE."""
    safe, opt = _tiny_chains(5)
    xs = _all_sequences()
    p0, pt = np.exp(safe.log_prob(xs)), np.exp(opt.log_prob(xs))
    loss = (xs.sum(axis=1) >= 4).astype(float)  # "infeasible" designs
    risk_t = float(pt @ loss)
    alpha = 0.5 * (float(p0 @ loss) + risk_t)  # between the two policies' risks, so beta matters
    sup = opt.max_log_ratio_over(safe)
    rng = np.random.default_rng(0)
    risks = []
    for _ in range(150):
        cal = rng.choice(27, size=60, p=p0)
        props = rng.choice(27, size=200, p=p0), rng.choice(27, size=200, p=pt)
        lr = np.log(pt) - np.log(p0)
        res = calibrate_beta(
            np.log(p0[cal]), np.log(pt[cal]), loss[cal], lr[props[0]], lr[props[1]], alpha, max_log_ratio=sup
        )
        q = p0 if res.beta == 0 else np.minimum(pt, res.beta * p0)
        risks.append(float(q @ loss / q.sum()))
    risks = np.array(risks)
    assert risks.mean() <= alpha + 3 * risks.std() / math.sqrt(len(risks))
    assert risk_t > alpha  # the unconstrained policy would have violated the tolerance
    assert (risks > 0).all() and np.median(risks) > float(p0 @ loss)  # and CPC did move off pi_0


def test_fixed_sequence_stops_at_first_violation_even_if_later_points_pass() -> None:
    """Non-monotone bound curve: the scan stops before the first bound above alpha."""
    bounds = np.array([0.01, 0.05, 0.2, 0.03, 0.04])
    assert fixed_sequence_select(bounds, 0.1) == 1
    assert fixed_sequence_select(np.array([0.5, 0.01]), 0.1) == -1
    assert fixed_sequence_select(np.array([0.01, 0.02]), 0.1) == 1


def test_weighted_bound_with_unit_weights_is_crc_bound() -> None:
    """With all weights 1 the CPC bound is the CRC bound (sum L + B) / (n + 1)."""
    losses = np.array([0.0, 1.0, 0.5, 0.0])
    assert math.isclose(weighted_bound(losses, np.zeros(4), 0.0, 1.0), (1.5 + 1) / 5)
    assert math.isclose(float(crc_bounds(losses[:, None])[0]), (1.5 + 1) / 5)


def test_textbook_crc_violates_on_nonmonotone_losses_and_gcrc_holds() -> None:
    """200 configurations all erring 12%: the inf rule deploys one (risk 0.12 > 0.1), gCRC mostly abstains."""
    alpha, chosen_text, chosen_g = 0.1, [], []
    for t in range(30):
        losses = configuration_losses(100, 200, 0.12, seed=t)
        chosen_text.append(crc_textbook(losses, alpha))
        chosen_g.append(max(fixed_sequence_select(crc_bounds(losses), alpha), 0))
    risk_text = np.mean([0.12 if i > 0 else 0.0 for i in chosen_text])
    risk_g = np.mean([0.12 if i > 0 else 0.0 for i in chosen_g])
    assert risk_text > alpha and risk_g <= alpha


def test_mapie_baselines_run_and_ltt_is_more_conservative() -> None:
    """mapie's CRC and LTT pick valid columns; LTT never picks a more aggressive one than CRC here."""
    pytest.importorskip("mapie", reason="baselines need mapie")
    rng = np.random.default_rng(0)
    losses = (rng.uniform(size=(200, 30)) < np.linspace(0, 0.3, 30)).astype(float)  # monotone risk
    i_crc, i_ltt = crc_mapie(losses, 0.1), ltt_mapie(losses, 0.1)
    assert 0 <= i_ltt <= i_crc
    assert i_crc == fixed_sequence_select(crc_bounds(losses), 0.1)


def test_controller_on_ehrlich_problem_controls_infeasibility() -> None:
    """End to end: the calibrated policy's sampled infeasibility is near or below alpha."""
    prob = EhrlichLikeProblem(seed=0)
    safe = prob.safe_policy()
    opt = prob.optimized_policy(safe, num_samples=1000)
    rng = np.random.default_rng(0)
    cal = safe.sample(400, rng)
    ctrl = ConformalPolicyController(safe, opt, ConformalControlConfig(alpha=0.15, num_proposals=500))
    pol = ctrl.calibrate(cal, prob.infeasible(cal).astype(float), rng)
    x = pol.sample(2000, rng)
    assert prob.infeasible(x).mean() < 0.15 + 0.06  # one calibration: guarantee is in expectation
    assert prob.infeasible(opt.sample(2000, rng)).mean() > 0.2


@pytest.mark.parametrize(
    "kwargs",
    [{"alpha": 0.0}, {"alpha": 1.5}, {"num_grid": 1}, {"test_weight": "max"}, {"test_weight_scale": 0.5}],
)
def test_bad_config_raises(kwargs: dict) -> None:
    """Invalid hyper-parameters are rejected in __post_init__."""
    with pytest.raises(ValueError, match="ConformalControlConfig"):
        ConformalControlConfig(**kwargs)


def test_bad_calibration_inputs_raise() -> None:
    """Losses outside [0, B], NaNs, empty or mismatched arrays, and black-box exact weights fail clearly."""
    safe, opt = _tiny_chains()
    ctrl = ConformalPolicyController(safe, opt, ConformalControlConfig(num_proposals=50))
    cal = safe.sample(10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="loss_bound"):
        ctrl.calibrate(cal, np.full(10, 2.0))
    with pytest.raises(ValueError, match="NaN"):
        ctrl.calibrate(cal, np.full(10, np.nan))
    with pytest.raises(ValueError, match="rows"):
        ctrl.calibrate(cal, np.zeros(9))
    with pytest.raises(ValueError, match="non-empty"):
        ctrl.calibrate(cal[:0], np.zeros(0))

    class BlackBox:
        sample, log_prob = opt.sample, opt.log_prob

    with pytest.raises(ValueError, match="empirical"):
        ConformalPolicyController(safe, BlackBox(), ConformalControlConfig(num_proposals=50)).calibrate(
            cal, np.zeros(10)
        )
    with pytest.raises(ValueError, match=r"\(L-1, V, V\)"):
        MarkovChainPolicy(np.ones(3), np.ones((2, 3, 4)))


def test_demo_quick_smoke(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    """The demo's --quick mode runs end to end and writes its results."""
    pytest.importorskip("mapie", reason="the demo compares with mapie")
    from families.conformal_control.demo import main

    assert main(["--quick", "--seeds", "1", "--trials", "3", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").exists() and (tmp_path / "cpc_tradeoff.png").exists()
    res = json.loads((tmp_path / "results.json").read_text())
    assert 0.02 <= res["policy"]["rows"]["any|safe pi_0"]["mean_risk"][0] <= 0.04  # pi_0 leaks ~3%
    assert all(0.0 <= r["abstain_mean"] <= r["alpha"] for r in res["boundary"])


def test_boundary_regime_guarantee_holds_when_uncertified_runs_abstain() -> None:
    """Safe risk = 0.9 alpha, n = 100, exact risk by enumeration, 4 problems x 600 calibrations.

    Abstaining when pi_0 is not certified keeps mean risk <= alpha + 2 SE in every problem. Deploying pi_0
    anyway exceeds alpha (pooled over problems) but stays within the fallback bound alpha + delta_n.
    """
    from families.conformal_control.boundary import make_boundary_problem, run_boundary

    rows = [run_boundary(make_boundary_problem(s), n_cal=100, trials=600, seed=s) for s in range(4)]
    for r in rows:
        assert r["abstain_mean"] <= r["alpha"] + 2 * r["abstain_se"], r
        assert r["fallback_mean"] <= r["alpha_plus_delta"] + 2 * r["fallback_se"], r
        assert abs(r["safe_risk"] / r["alpha"] - 0.9) < 1e-9 and r["optimized_risk"] > 2 * r["alpha"]
    excess = np.array([r["fallback_mean"] - r["alpha"] for r in rows])
    pooled_se = math.sqrt(sum(r["fallback_se"] ** 2 for r in rows)) / len(rows)
    assert excess.mean() > 2 * pooled_se  # the fallback really does break alpha at this boundary


def test_fallback_excess_matches_simulation_and_shrinks_with_n() -> None:
    """delta_n equals a Monte Carlo estimate of E[(mean of n+1 Bernoulli losses - alpha)_+] and falls with n."""
    from families.conformal_control.boundary import fallback_excess, safe_risk_upper_bound

    rng = np.random.default_rng(0)
    sims = np.maximum(rng.binomial(101, 0.09, size=200_000) / 101 - 0.1, 0).mean()
    assert abs(fallback_excess(100, 0.09, 0.1) - sims) < 3e-4
    assert (
        fallback_excess(100, 0.09, 0.1)
        > fallback_excess(1000, 0.09, 0.1)
        > fallback_excess(10_000, 0.09, 0.1)
    )
    assert fallback_excess(100, 0.0, 0.1) == 0.0
    covered = [safe_risk_upper_bound(rng.uniform(size=200) < 0.09) >= 0.09 for _ in range(400)]
    assert np.mean(covered) >= 0.93  # a 95% upper bound


def _two_round_risks(seed: int, trials: int = 200, n0: int = 100, n1: int = 100) -> tuple:
    """Round 1 constrains pi_1 against pi_0; round 2 constrains pi_2 against the deployed round-1 policy,
    calibrating on both rounds' data (density = their mixture). Exact risk by enumeration."""
    rng = np.random.default_rng(seed)
    V, L = 3, 3  # 27 sequences
    safe = MarkovChainPolicy(rng.dirichlet(np.ones(V) * 2), rng.dirichlet(np.ones(V) * 2, size=(L - 1, V)))
    opt1 = MarkovChainPolicy(
        rng.dirichlet(np.ones(V) * 0.7), rng.dirichlet(np.ones(V) * 0.7, size=(L - 1, V))
    )
    opt2 = MarkovChainPolicy(
        rng.dirichlet(np.ones(V) * 0.4), rng.dirichlet(np.ones(V) * 0.4, size=(L - 1, V))
    )
    xs = np.array(list(itertools.product(range(V), repeat=L)))
    p0, p1, p2 = (np.exp(m.log_prob(xs)) for m in (safe, opt1, opt2))
    lr = np.log(p1) - np.log(p0)
    loss = (np.argsort(np.argsort(-(np.log(p2) - np.log(p0)))) < 6).astype(float)
    alpha = 0.5 * (p0 @ loss + p2 @ loss)
    N = xs.shape[0]
    risks, certs = [], []
    for _ in range(trials):
        cal0 = rng.choice(N, size=n0, p=p0)
        props = rng.choice(N, size=300, p=p0), rng.choice(N, size=300, p=p1)
        r1 = calibrate_beta(
            np.log(p0[cal0]),
            np.log(p1[cal0]),
            loss[cal0],
            lr[props[0]],
            lr[props[1]],
            alpha,
            max_log_ratio=float(lr.max()),
        )
        if not r1.certified:
            risks.append(0.0)
            certs.append(False)
            continue
        q1 = p0 if r1.beta == 0 else np.minimum(p1, r1.beta * p0)
        q1 = q1 / q1.sum()
        cal1 = rng.choice(N, size=n1, p=q1)
        cal = np.concatenate([cal0, cal1])
        mix = (n0 * p0 + n1 * q1) / (n0 + n1)
        ratio = np.log(p2) - np.log(q1)
        grid = np.concatenate([[0.0], np.unique(np.exp(np.quantile(ratio, np.linspace(0, 1, 30)))), [np.inf]])

        def sup(beta: float, q1: np.ndarray = q1, mix: np.ndarray = mix) -> float:
            t = q1 if beta == 0 else (p2 if math.isinf(beta) else np.minimum(p2, beta * q1))
            return float(np.max(np.log(t) - np.log(mix)))

        r2 = calibrate_beta_sequential(
            np.log(p2[cal]), np.log(q1[cal]), np.log(mix[cal]), loss[cal], grid, sup, alpha
        )
        if not r2.certified:
            risks.append(0.0)
            certs.append(False)
            continue
        q2 = q1 if r2.beta == 0 else (p2 if math.isinf(r2.beta) else np.minimum(p2, r2.beta * q1))
        risks.append(float(q2 @ loss / q2.sum()))
        certs.append(True)
    risks = np.array(risks)
    return (
        risks.mean(),
        risks.std() / math.sqrt(len(risks)),
        alpha,
        float(p2 @ loss),
        float(np.mean(certs)),
        float(p0 @ loss),
    )


def test_sequential_two_round_procedure_controls_risk_with_exact_enumeration() -> None:
    """Mean realised risk of the round-2 policy stays <= alpha + 2 SE in every problem, while the
    unconstrained round-2 policy is far above alpha and the deployed policy moved off pi_0."""
    from families.conformal_control.boundary import quiet_model_logger

    with quiet_model_logger():
        for seed in range(3):
            mean, se, alpha, risk_new, certified, risk_safe = _two_round_risks(seed)
            assert mean <= alpha + 2 * se, (seed, mean, alpha)
            assert risk_new > alpha + 0.1 and mean > risk_safe and certified > 0.5
