"""Synthetic inference problems with exact posteriors and exact evidence, for testing MIRA.

Both generators draw T joint samples (theta*_t, x_t) from a known process, and for each candidate
model S samples of theta given x_t. Everything is analytic (Gaussian conjugacy), so the ground truth
of "which candidate is right" never depends on a fitted model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GAUSSIAN_CASES = ("correct", "too_wide", "too_narrow", "biased", "prior_only")


@dataclass
class Problem:
    """Joint draws of the true process and candidate samples per truth."""

    truth: np.ndarray  # (T, q)
    x: np.ndarray  # (T, dx) the conditioning data
    samples: np.ndarray  # (M, T, S, q)
    names: list[str]
    log_evidence: np.ndarray | None = None  # (M, T) log p(x_t | model m), when models are Bayesian


def _check_sizes(**sizes: int) -> None:
    bad = [f"`{k}` = {v}" for k, v in sizes.items() if not isinstance(v, int | np.integer) or v < 1]
    if bad:
        raise ValueError("Sizes must be positive ints: " + ", ".join(bad) + ".")


def gaussian_problem(
    num_truths: int = 1000,
    num_samples: int = 500,
    dim: int = 2,
    noise_std: float = 0.3,
    seed: int = 0,
) -> Problem:
    """theta ~ N(0, I_q), x = theta + N(0, s^2 I_q); the posterior is N(x/(1+s^2), s^2/(1+s^2) I_q).

    Candidates: the exact posterior; a 3x too wide and a 3x too narrow one; one shifted by +1
    posterior std in every coordinate; and the prior N(0, I), which ignores x altogether.
    """
    _check_sizes(num_truths=num_truths, num_samples=num_samples, dim=dim)
    if not noise_std > 0:
        raise ValueError(f"`noise_std` must be > 0, got {noise_std}.")
    rng = np.random.default_rng(seed)
    T, S, q = num_truths, num_samples, dim
    theta = rng.standard_normal((T, q))
    x = theta + noise_std * rng.standard_normal((T, q))
    shrink = 1.0 / (1.0 + noise_std**2)
    post_mean = shrink * x  # (T, q)
    post_std = float(np.sqrt(noise_std**2 * shrink))
    eps = rng.standard_normal((len(GAUSSIAN_CASES), T, S, q))  # one noise block per candidate
    mean, std = post_mean[:, None, :], post_std
    samples = np.stack(
        [
            mean + std * eps[0],
            mean + 3.0 * std * eps[1],
            mean + std / 3.0 * eps[2],
            mean + std + std * eps[3],
            np.zeros_like(mean) + eps[4],  # prior N(0, I)
        ]
    )
    return Problem(truth=theta, x=x, samples=samples, names=list(GAUSSIAN_CASES))


@dataclass
class RegressionModel:
    """A conjugate Bayesian linear regression: polynomial basis up to `degree`, weight prior std."""

    degree: int
    prior_std: float

    @property
    def name(self) -> str:
        return f"poly{self.degree}_tau{self.prior_std:g}"

    def features(self, z: np.ndarray) -> np.ndarray:
        # Legendre polynomials keep the design well conditioned on [-1, 1]
        return np.polynomial.legendre.legvander(z, self.degree)  # (n, degree + 1)


def regression_problem(
    models: list[RegressionModel],
    true_model: RegressionModel,
    num_datasets: int = 500,
    num_samples: int = 300,
    num_obs: int = 12,
    noise_std: float = 0.3,
    test_points: tuple[float, ...] = (-0.9, 0.0, 0.9),
    seed: int = 0,
) -> Problem:
    """Bayesian model comparison where the evidence is exact.

    The true process draws weights w ~ N(0, tau^2 I) of `true_model`, data y = Phi w + noise at fixed
    inputs, and the quantity of interest theta = noisy y at `test_points`. Each candidate's
    conditional q_m(theta | data) is its exact posterior predictive, and its log evidence
    log N(y; 0, tau^2 Phi Phi^T + s^2 I) is exact, so MIRA rankings can be checked against evidence.
    """
    _check_sizes(num_datasets=num_datasets, num_samples=num_samples, num_obs=num_obs)
    if not models:
        raise ValueError("`models` is empty; pass at least one RegressionModel candidate.")
    if not noise_std > 0:
        raise ValueError(f"`noise_std` must be > 0, got {noise_std}.")
    rng = np.random.default_rng(seed)
    T, S = num_datasets, num_samples
    z_obs = np.linspace(-1.0, 1.0, num_obs)
    z_test = np.asarray(test_points, dtype=float)
    q = z_test.size
    phi_true, phi_true_test = true_model.features(z_obs), true_model.features(z_test)
    w = true_model.prior_std * rng.standard_normal((T, phi_true.shape[1]))
    y = w @ phi_true.T + noise_std * rng.standard_normal((T, num_obs))  # (T, n)
    theta = w @ phi_true_test.T + noise_std * rng.standard_normal((T, q))  # (T, q)

    all_samples, all_logev = [], []
    for m in models:
        phi, phi_test = m.features(z_obs), m.features(z_test)  # (n, p), (q, p)
        p = phi.shape[1]
        precision = phi.T @ phi / noise_std**2 + np.eye(p) / m.prior_std**2
        cov_w = np.linalg.inv(precision)
        mean_w = y @ phi @ cov_w / noise_std**2  # (T, p); cov_w is symmetric
        pred_mean = mean_w @ phi_test.T  # (T, q)
        pred_cov = phi_test @ cov_w @ phi_test.T + noise_std**2 * np.eye(q)
        chol = np.linalg.cholesky(pred_cov)
        eps = rng.standard_normal((T, S, q))
        all_samples.append(pred_mean[:, None, :] + eps @ chol.T)
        marg_cov = m.prior_std**2 * phi @ phi.T + noise_std**2 * np.eye(num_obs)
        all_logev.append(_gauss_logpdf(y, marg_cov))
    return Problem(
        truth=theta,
        x=y,
        samples=np.stack(all_samples),
        names=[m.name for m in models],
        log_evidence=np.stack(all_logev),
    )


def _gauss_logpdf(y: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """log N(y_t; 0, cov) for each row of y (T, n)."""
    chol = np.linalg.cholesky(cov)
    white = np.linalg.solve(chol, y.T)  # (n, T)
    logdet = 2.0 * np.log(np.diag(chol)).sum()
    return -0.5 * ((white**2).sum(axis=0) + logdet + y.shape[1] * np.log(2 * np.pi))
