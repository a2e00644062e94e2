"""Tests of the MIRA family: analytic reference, agreement with `mira-score`, rankings, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from families.mira import MiraConfig, compare_models, energy_score, mira, mira_reference
from families.mira.data import RegressionModel, gaussian_problem, regression_problem


def _correct_case(seed: int, T: int = 300, S: int = 40, q: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mu = torch.rand(T, q, generator=g)
    truth = mu + 0.1 * torch.randn(T, q, generator=g)
    samples = mu[:, None] + 0.1 * torch.randn(T, S, q, generator=g)  # same law as the truth
    return truth, samples


def test_reference_formula_matches_closed_form_limits() -> None:
    """The finite-N reference tends to 2/3 and the per-truth variance to 1/18."""
    mean, std = mira_reference(10**6)
    assert abs(mean - 2 / 3) < 1e-6
    assert abs(std**2 - 1 / 18) < 1e-6
    mean_small, _ = mira_reference(2)  # N = 1: (2+3)/(3*2)
    assert math.isclose(mean_small, 5 / 6)


def test_reference_formula_matches_simulation_of_the_statistic() -> None:
    """Simulate U ~ U(0,1), n ~ Bin(N, U), k ~ Bern(U) and compare mean and variance with the formula."""
    rng = np.random.default_rng(0)
    N = 9
    u = rng.uniform(size=400_000)
    n = rng.binomial(N, u)
    k = rng.uniform(size=u.size) < u
    y = np.where(k, n + 1, N - n + 1) / (N + 1)
    mean, std = mira_reference(N + 1)
    assert abs(y.mean() - mean) < 4 * y.std() / math.sqrt(y.size)
    assert abs(y.std() - std) < 2e-3


def test_correct_candidate_hits_reference_within_ci_over_seeds() -> None:
    """Over 40 seeds the z-scores of a correct candidate have mean ~0 and std ~1."""
    zs = []
    for seed in range(40):
        truth, samples = _correct_case(seed)
        res = mira(truth, samples, num_runs=4, generator=torch.Generator().manual_seed(seed))
        zs.append(float(res.z[0]))
    zs = np.array(zs)
    assert abs(zs.mean()) < 3 / math.sqrt(len(zs)) * 1.3  # mean of 40 N(0,1) within ~3.9 SE
    assert 0.6 < zs.std(ddof=1) < 1.5
    assert np.mean(np.abs(zs) < 2.5) >= 0.85


def test_agrees_with_official_mira_score_on_same_samples_and_seed() -> None:
    """Same samples and seed: our score equals `mira_score.mira` (with and without min-max scaling)."""
    mira_score = pytest.importorskip("mira_score", reason="agreement test needs the mira-score package")
    torch.manual_seed(3)
    truth = torch.randn(120, 3)
    samples = torch.stack(
        [truth[:, None] + torch.randn(120, 30, 3), 2 * torch.randn(120, 30, 3)]
    )  # (2, T, S, q)
    for norm in (False, True):
        torch.manual_seed(11)
        ref_score, ref_std = mira_score.mira(
            truth, samples, num_runs=7, norm=norm, disable_tqdm=True, device=torch.device("cpu")
        )
        ours = mira(truth, samples, num_runs=7, normalize=norm, generator=torch.Generator().manual_seed(11))
        torch.testing.assert_close(ours.score, ref_score, rtol=0, atol=1e-6)
        torch.testing.assert_close(ours.run_std, ref_std, rtol=0, atol=1e-6)


def test_miscalibrated_candidates_move_away_from_reference_in_the_right_direction() -> None:
    """Too narrow and biased fall below the reference, too wide rises above it, prior ties."""
    prob = gaussian_problem(num_truths=400, num_samples=60, dim=2, seed=1)
    res = mira(
        prob.truth, prob.samples, num_runs=6, normalize=True, generator=torch.Generator().manual_seed(1)
    )
    z = dict(zip(prob.names, res.z.tolist()))
    assert abs(z["correct"]) < 3.5
    assert z["too_narrow"] < -5 and z["biased"] < -3 and z["too_wide"] > 5
    assert abs(z["prior_only"]) < 3.5  # the blind spot the sharpness companion closes


def test_sharpness_companion_ranks_true_posterior_above_prior() -> None:
    """MIRA cannot separate prior from posterior; the energy-score gate puts the posterior first."""
    prob = gaussian_problem(num_truths=300, num_samples=40, dim=2, seed=2)
    comp = compare_models(
        prob.truth, prob.samples, prob.names, num_runs=5, generator=torch.Generator().manual_seed(0)
    )
    assert comp.ranking_with_sharpness[0] == "correct"
    es = energy_score(prob.truth, prob.samples)
    assert es[prob.names.index("correct")].mean() < es[prob.names.index("prior_only")].mean()


def test_energy_score_is_zero_mean_difference_for_identical_point_masses() -> None:
    """A point mass at the truth has energy score 0 (both distance terms vanish)."""
    truth = torch.randn(5, 2)
    samples = truth[:, None, :].expand(5, 4, 2).clone()
    torch.testing.assert_close(energy_score(truth, samples), torch.zeros(1, 5, dtype=truth.dtype))


def test_regression_problem_evidence_prefers_true_model() -> None:
    """Exact log evidence averaged over datasets is highest for the generating model."""
    models = [RegressionModel(d, 1.0) for d in (1, 3, 5)]
    prob = regression_problem(models, RegressionModel(3, 1.0), num_datasets=200, num_samples=10, seed=0)
    assert prob.samples.shape == (3, 200, 10, 3)
    assert int(np.argmax(prob.log_evidence.mean(axis=1))) == 1


def test_external_references_count_all_samples_and_have_no_analytic_reference() -> None:
    """The fixed branch of the official code: with external reference points all S samples count."""
    truth, samples = _correct_case(0, T=20, S=5)
    res = mira(truth, samples, num_runs=2, references=truth.clone() + 0.01)
    assert res.num_counted == 5 and math.isnan(res.reference)
    assert torch.isfinite(res.score).all()


@pytest.mark.parametrize(
    ("truth", "samples", "match"),
    [
        (torch.zeros(4, 2), torch.zeros(4, 1, 2), "at least 2"),
        (torch.zeros(4, 2), torch.zeros(5, 3, 2), "implies"),
        (torch.zeros(4), torch.zeros(4, 3, 1), r"\(T, q\)"),
        (torch.full((4, 2), float("nan")), torch.zeros(4, 3, 2), "NaN"),
        (torch.zeros(0, 2), torch.zeros(0, 3, 2), "empty"),
        (torch.zeros(4, 2), torch.zeros(2, 2, 4, 3, 2), r"\(M, T, S, q\)"),
    ],
)
def test_bad_inputs_raise_clear_errors(truth: torch.Tensor, samples: torch.Tensor, match: str) -> None:
    """Shapes, NaNs and empty inputs are rejected with a message naming the problem."""
    with pytest.raises(ValueError, match=match):
        mira(truth, samples, num_runs=1)


def test_bad_hyperparameters_raise() -> None:
    """num_runs < 1, bad names and bad configs are rejected."""
    truth, samples = _correct_case(0, T=10, S=4)
    with pytest.raises(ValueError, match="num_runs"):
        mira(truth, samples, num_runs=0)
    with pytest.raises(ValueError, match="names"):
        compare_models(truth, samples, names=["a", "b"], num_runs=1)
    with pytest.raises(ValueError, match="num_runs"):
        MiraConfig(num_runs=0)
    with pytest.raises(ValueError, match="num_samples"):
        mira_reference(1)


def test_demo_quick_smoke(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    """The demo's --quick mode runs end to end (sbi peers skipped to keep it fast) and writes results."""
    pytest.importorskip("mira_score", reason="the demo compares with the mira-score package")
    from families.mira.demo import main

    rc = main(["--quick", "--seeds", "1", "--num-runs", "2", "--no-sbi", "--out", str(tmp_path)])
    assert rc == 0
    assert (tmp_path / "results.json").exists() and (tmp_path / "mira_scores.png").exists()
    res = json.loads((tmp_path / "results.json").read_text())
    assert 0.6 <= res["gaussian"]["rows"]["correct"]["mira"][0] <= 0.73  # near the 2/3 reference
