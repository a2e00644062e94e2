"""Tests of the LDM family: Kalman filter vs pykalman, named instances vs reference losses, identifiability."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.demo_cli import load_results
from families.ldm import LDM, KalmanSSL, KalmanSSLConfig, ica_loss, kalman_filter
from families.ldm.data import dot_motion, ica_mixture, planted_linear_system


def test_kalman_filter_equals_pykalman() -> None:
    """Filtered means, covariances-driven predictions and the log-likelihood match pykalman exactly."""
    pykalman = pytest.importorskip("pykalman", reason="reference filter")
    rng = np.random.default_rng(0)
    a = np.array([[0.9, -0.2], [0.2, 0.9]])
    c = rng.normal(size=(3, 2))
    q, r = np.diag([0.1, 0.2]), np.diag([0.3, 0.1, 0.2])
    offset, m0, p0 = np.array([0.1, -0.2]), np.array([0.5, 0.0]), np.eye(2)
    obs = rng.normal(size=(25, 3))
    kf = pykalman.KalmanFilter(a, c, q, r, offset, None, m0, p0)
    ref_mean, _ = kf.filter(obs)

    def t(arr: np.ndarray) -> torch.Tensor:
        return torch.tensor(arr, dtype=torch.float64)

    out = kalman_filter(t(obs)[None], t(a), t(offset), t(c), t(q), t(r), t(m0), t(p0))
    np.testing.assert_allclose(out["filtered_mean"][0].numpy(), ref_mean, atol=1e-10)
    np.testing.assert_allclose(out["loglik"].sum().item(), kf.loglikelihood(obs), rtol=1e-10)


def test_vicreg_and_simclr_instances_equal_reference_losses() -> None:
    """LDM.vicreg == VICRegLoss and LDM.simclr == NT-Xent (pytorch-metric-learning) on the same batch."""
    pytest.importorskip("pytorch_metric_learning", reason="reference SSL losses")
    from families.ldm.baselines import reference_ntxent, reference_vicreg

    z1, z2 = torch.randn(32, 8), torch.randn(32, 8)
    torch.testing.assert_close(LDM.vicreg()(z1, z2), reference_vicreg(z1, z2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(LDM.simclr(0.3)(z1, z2), reference_ntxent(z1, z2, 0.3), rtol=1e-5, atol=1e-5)
    # non-default weights too: the mapping is weight-for-weight, not a coincidence of defaults
    torch.testing.assert_close(
        LDM.vicreg(3.0, 7.0, 2.0)(z1, z2), reference_vicreg(z1, z2, 3.0, 7.0, 2.0), rtol=1e-5, atol=1e-5
    )


def test_byol_instance_equals_reference_and_stops_gradient() -> None:
    """LDM.byol equals 2 - 2 cos(p, sg(z')) and sends no gradient into the target branch."""
    from families.ldm.baselines import reference_byol

    p, z = torch.randn(16, 5, requires_grad=True), torch.randn(16, 5, requires_grad=True)
    loss = LDM.byol()(p, z)
    torch.testing.assert_close(loss, reference_byol(p, z))
    loss.backward()
    assert z.grad is None and p.grad is not None


def test_ica_loss_equals_laplace_negative_log_likelihood() -> None:
    """ica_loss is the exact ICA negative log-likelihood with unit-Laplace sources (scipy reference)."""
    from scipy.stats import laplace

    x, _ = ica_mixture(200, 3, seed=1)
    w = np.random.default_rng(2).normal(size=(3, 3))
    ref = -(laplace.logpdf(x @ w.T).sum(1).mean() + np.log(abs(np.linalg.det(w))))
    got = ica_loss(torch.tensor(w), torch.tensor(x)).item()
    assert got == pytest.approx(ref, rel=1e-9)


def test_transition_spectral_radius_is_clamped_for_any_parameters() -> None:
    """|eig(A)| <= max_spectral_radius even for a wildly unstable raw transition matrix."""
    model = KalmanSSL(KalmanSSLConfig(input_size=4, latent_size=3, state_size=3))
    with torch.no_grad():
        model.transition_raw.copy_(5 * torch.randn(3, 3))
    radius = torch.linalg.eigvals(model.transition()).abs().max().item()
    assert radius <= 1.02 + 1e-5


def test_kalmanssl_identifies_planted_linear_latents_up_to_affine_map() -> None:
    """After training, an affine map from the filtered state to the true latent has R^2 close to 1."""
    x, s = planted_linear_system(16, 20, obs_size=6, seed=0)
    model = KalmanSSL(KalmanSSLConfig(input_size=6, hidden_size=16, latent_size=2, state_size=2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def affine_r2() -> float:
        with torch.no_grad():
            feat = model(x)["filtered_mean"].reshape(-1, 2)
        design = torch.cat([feat, torch.ones(len(feat), 1)], 1)
        target = s.reshape(-1, 2)
        fit = design @ torch.linalg.lstsq(design, target).solution
        return (1 - (fit - target).pow(2).sum(0) / (target - target.mean(0)).pow(2).sum(0)).mean().item()

    before = affine_r2()
    for _ in range(80):
        loss = model.loss(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = affine_r2()
    assert after > 0.95
    assert after > before


def test_bad_inputs_raise_clear_errors() -> None:
    """Invalid configs, unsupported objective pairs, bad shapes, NaNs and tiny batches raise ValueError."""
    with pytest.raises(ValueError, match="entropy"):
        KalmanSSLConfig(entropy="knn")
    with pytest.raises(ValueError, match="latent_size"):
        KalmanSSLConfig(latent_size=4, state_size=2, observation="identity")
    with pytest.raises(ValueError, match="max_spectral_radius"):
        KalmanSSLConfig(max_spectral_radius=0)
    with pytest.raises(ValueError, match="unsupported pair"):
        LDM("vmf", "logdet")
    with pytest.raises(ValueError, match="latent_model"):
        LDM("cauchy", "kde")
    with pytest.raises(ValueError, match="temperature"):
        LDM.simclr(temperature=0.0)
    with pytest.raises(ValueError, match="same shape"):
        LDM.vicreg()(torch.randn(4, 3), torch.randn(4, 2))
    with pytest.raises(ValueError, match="at least 2"):
        LDM.vicreg()(torch.randn(1, 3), torch.randn(1, 3))
    with pytest.raises(ValueError, match="NaN"):
        LDM.simclr()(torch.full((4, 3), float("nan")), torch.randn(4, 3))
    model = KalmanSSL(KalmanSSLConfig(input_size=4, latent_size=2, state_size=2))
    with pytest.raises(ValueError, match="inputs"):
        model(torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="2 steps"):
        model(torch.randn(2, 1, 4))
    with pytest.raises(ValueError):
        dot_motion(0, 10)
    with pytest.raises(ValueError):
        ica_loss(torch.randn(3, 2), torch.randn(5, 2))


def test_demo_quick_smoke(tmp_path) -> None:
    """The demo's ICA part runs end to end in quick mode and writes results."""
    pytest.importorskip("sklearn", reason="FastICA baseline")
    from families.ldm.demo import main

    assert main(["--quick", "--parts", "ica", "--out", str(tmp_path)]) == 0
    ica = load_results(tmp_path)["ica"][0]
    assert 0 <= ica["fastica"] < 0.2 and 0 <= ica["ldm_ica"] < 0.5  # Amari index: 0 perfect, 1 none
