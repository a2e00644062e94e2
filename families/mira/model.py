"""MIRA ("Mass In Random Areas"): a sample-based score of a candidate conditional distribution.

Paper: Sharief, Zeghal, Barco, Lemos, Hezaveh, Perreault-Levasseur, "MIRA: A Score for Conditional
Distribution Accuracy and Model Comparison", ICML 2026, arXiv 2605.02014.
Reference code: github.com/SammyS15/mira-score (PyPI `mira-score`); read, not copied.

Letters used in shapes: T truths (joint draws (x_t, theta*_t) of the true process), M candidate
models, S candidate samples per truth (draws of theta ~ q_m(theta | x_t)), q parameter dimensions,
R Monte Carlo runs.

One run, for every truth t and model m: draw a centre c_t ~ U[0,1]^q (shared by all models, so model
differences are paired), pick one candidate sample at random, and let its distance to c_t be the
radius r. Count the n of the other N = S-1 samples strictly inside the ball B(c_t, r) and let k say
whether the truth lies in the ball. The statistic is the Laplace-smoothed probability the candidate
gives to the truth's side of the ball, (n+1)/(N+2) or (N-n+1)/(N+2), divided by its maximum
(N+1)/(N+2). If the candidate equals the true conditional, its mass U of the ball is Uniform(0, 1)
(the radius is one of its own samples), n | U ~ Bin(N, U) and k | U ~ Bern(U); hence the analytic
reference below. The same argument shows the score's expectation is 1/2 + E[(2U - 1) P_true(B)],
so a too-wide candidate can score *above* the reference: compare |score - reference|, not score.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

logger = logging.getLogger(__name__)

ArrayLike = torch.Tensor | np.ndarray


def mira_reference(num_samples: int, external_reference: bool = False) -> tuple[float, float]:
    """Exact mean and per-truth standard deviation of one MIRA run for a correct candidate.

    With N counted samples (S-1 when the radius comes from one of the S samples), a correct
    candidate gives E = (2N+3)/(3(N+1)) -> 2/3 and Var = N(N+3)/(18(N+1)^2) -> 1/18 per truth.
    Derivation: E[U(n+1)] = N/3 + 1/2 and E[U(n+1)^2] = N^2/4 + 3N/4 + 1/2 with U ~ U(0,1),
    n | U ~ Bin(N, U); the outside term is the mirror image.
    """
    n_counted = num_samples if external_reference else num_samples - 1
    if n_counted < 1:
        raise ValueError(
            f"`num_samples` must be >= 2 (one sample sets the radius, the rest are counted), got {num_samples}."
        )
    mean = (2 * n_counted + 3) / (3 * (n_counted + 1))
    var = n_counted * (n_counted + 3) / (18 * (n_counted + 1) ** 2)
    return mean, math.sqrt(var)


def _as_tensor(name: str, value: ArrayLike) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor or numpy array, got {type(value).__name__}.")
    if not value.is_floating_point():
        value = value.double()
    if value.numel() == 0:
        raise ValueError(f"`{name}` is empty; pass at least one truth and two samples.")
    if not torch.isfinite(value).all():
        raise ValueError(f"`{name}` contains NaN or inf values; drop or impute those rows first.")
    return value


def check_inputs(truth: ArrayLike, samples: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate and return `truth` (T, q) and `samples` (M, T, S, q); (T, S, q) is read as M = 1."""
    truth = _as_tensor("truth", truth)
    samples = _as_tensor("samples", samples)
    if truth.ndim != 2:
        raise ValueError(f"`truth` must have shape (T, q), got {tuple(truth.shape)}.")
    if samples.ndim == 3:
        samples = samples.unsqueeze(0)  # (1, T, S, q)
    if samples.ndim != 4:
        raise ValueError(f"`samples` must have shape (M, T, S, q) or (T, S, q), got {tuple(samples.shape)}.")
    M, T, S, q = samples.shape
    if truth.shape != (T, q):
        raise ValueError(
            f"`truth` has shape {tuple(truth.shape)} but `samples` implies (T, q) = {(T, q)}; "
            "each truth needs its own S candidate samples."
        )
    if S < 2:
        raise ValueError(f"Need at least 2 candidate samples per truth, got S = {S}.")
    dtype = torch.promote_types(truth.dtype, samples.dtype)
    return truth.to(dtype), samples.to(dtype)


def unit_cube_scale(truth: torch.Tensor, samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Min-max scale both with the truths' per-dimension range, so U[0,1]^q centres cover the data."""
    lo = truth.min(dim=0, keepdim=True).values  # (1, q)
    span = truth.max(dim=0, keepdim=True).values - lo + 1e-8  # 1e-8 as in mira-score, for equal values
    return (truth - lo) / span, (samples - lo) / span


@dataclass
class MiraResult:
    """Output of `mira`: the score per model and everything needed for its uncertainty."""

    score: torch.Tensor  # (M,) mean over runs and truths
    run_std: torch.Tensor  # (M,) spread across Monte Carlo runs (Monte Carlo error only)
    per_item: torch.Tensor  # (M, T) run-averaged statistic per truth
    per_run: torch.Tensor  # (R, M)
    num_counted: int  # N, the number of samples compared with each radius
    reference: float  # expected score of a correct candidate (nan with external references)
    reference_item_std: float  # per-truth std of one run for a correct candidate

    @property
    def stderr(self) -> torch.Tensor:
        """(M,) standard error over truths: the per-truth averages are i.i.d. across truths."""
        T = self.per_item.shape[1]
        if T < 2:
            return torch.full_like(self.score, float("nan"))
        return self.per_item.std(dim=1, unbiased=True) / math.sqrt(T)

    @property
    def z(self) -> torch.Tensor:
        """(M,) z-score of each model's score against the correct-candidate reference."""
        return (self.score - self.reference) / self.stderr

    def paired_difference(self, i: int, j: int) -> tuple[float, float]:
        """Score difference of models i and j and its standard error (centres are shared)."""
        diff = self.per_item[i] - self.per_item[j]  # (T,)
        return float(diff.mean()), float(diff.std(unbiased=True) / math.sqrt(diff.numel()))


def mira(
    truth: ArrayLike,
    samples: ArrayLike,
    num_runs: int = 100,
    normalize: bool = False,
    centers: ArrayLike | None = None,
    references: ArrayLike | None = None,
    generator: torch.Generator | None = None,
) -> MiraResult:
    """MIRA score of M candidate conditionals, from T truths and S candidate samples per truth.

    Args:
        truth (`Tensor` of shape (T, q)): draws theta*_t of the true process, one per condition x_t.
        samples (`Tensor` of shape (M, T, S, q) or (T, S, q)): candidate draws given x_t.
        num_runs (`int`, defaults to 100): Monte Carlo runs (new centres and radii each run).
        normalize (`bool`): min-max scale with the truths' range first (centres are U[0,1]^q).
        centers (`Tensor` of shape (T, q), *optional*): fixed centres instead of uniform ones.
        references (`Tensor` of shape (T, q), *optional*): points that set the radius instead of a
            candidate sample; then all S samples are counted and no analytic reference exists.
        generator (`torch.Generator`, *optional*): source of randomness. Random numbers are drawn in
            the order of the official package (centres, then reference indices, per run), so a
            generator seeded like the global RNG reproduces `mira_score.mira` exactly.
    """
    truth, samples = check_inputs(truth, samples)
    if not isinstance(num_runs, int) or num_runs < 1:
        raise ValueError(f"`num_runs` must be an int >= 1, got {num_runs!r}.")
    M, T, S, q = samples.shape
    if normalize:
        truth, samples = unit_cube_scale(truth, samples)
    fixed_centers = None if centers is None else _checked_points("centers", centers, T, q, truth)
    ref_points = None if references is None else _checked_points("references", references, T, q, truth)
    n_counted = S if ref_points is not None else S - 1

    per_run = torch.zeros(num_runs, M, dtype=truth.dtype)
    item_sum = torch.zeros(M, T, dtype=truth.dtype)
    m_idx = torch.arange(M)[:, None]
    t_idx = torch.arange(T)[None, :]
    for run in range(num_runs):
        # default-dtype draw keeps the random stream identical to the official package
        c = fixed_centers if fixed_centers is not None else torch.rand((T, q), generator=generator)
        c = c.to(truth.dtype)
        dists = torch.linalg.vector_norm(c[None, :, None, :] - samples, dim=-1)  # (M, T, S)
        if ref_points is None:
            pick = torch.randint(0, S, (M, T), generator=generator)  # (M, T) one reference sample each
            radius = dists[m_idx, t_idx, pick]  # (M, T)
            # no masking needed: the reference sample sits exactly on the radius, so the strict
            # "<" below never counts it (the official code masks it with inf; same counts)
            counted = dists
        else:
            # fixes the official code, where this branch leaves the counted distances undefined
            radius = torch.linalg.vector_norm(c - ref_points, dim=-1).expand(M, T)  # (M, T)
            counted = dists
        inside = (counted < radius[..., None]).sum(dim=-1)  # (M, T) n
        truth_in = torch.linalg.vector_norm(c - truth, dim=-1)[None, :] <= radius  # (M, T) k
        stat = torch.where(truth_in, inside + 1, n_counted - inside + 1) / (n_counted + 1)  # (M, T)
        per_run[run] = stat.mean(dim=1)
        item_sum += stat
    if ref_points is None:
        ref_mean, ref_std = mira_reference(S)
    else:
        ref_mean, ref_std = float("nan"), float("nan")
    run_std = per_run.std(dim=0, unbiased=True) if num_runs > 1 else torch.zeros(M, dtype=truth.dtype)
    return MiraResult(
        score=per_run.mean(dim=0),
        run_std=run_std,
        per_item=item_sum / num_runs,
        per_run=per_run,
        num_counted=n_counted,
        reference=ref_mean,
        reference_item_std=ref_std,
    )


def _checked_points(name: str, points: ArrayLike, T: int, q: int, like: torch.Tensor) -> torch.Tensor:
    points = _as_tensor(name, points)
    if points.shape != (T, q):
        raise ValueError(f"`{name}` must have shape (T, q) = {(T, q)}, got {tuple(points.shape)}.")
    return points.to(like.dtype)


def energy_score(truth: ArrayLike, samples: ArrayLike, normalize: bool = False) -> torch.Tensor:
    """Per-truth energy score E||X - theta*|| - E||X - X'||/2, shape (M, T); lower is better.

    A strictly proper scoring rule (Gneiting & Raftery 2007): unlike MIRA, SBC and TARP it ranks the
    true posterior strictly above the prior, because it rewards sharpness. E||X - X'|| is estimated
    from disjoint sample pairs (unbiased, O(S) instead of O(S^2)).
    """
    truth, samples = check_inputs(truth, samples)
    if normalize:
        truth, samples = unit_cube_scale(truth, samples)
    to_truth = torch.linalg.vector_norm(samples - truth[None, :, None, :], dim=-1).mean(dim=-1)  # (M, T)
    half = samples.shape[2] // 2
    spread = torch.linalg.vector_norm(samples[:, :, :half] - samples[:, :, half : 2 * half], dim=-1)
    return to_truth - 0.5 * spread.mean(dim=-1)


@dataclass
class ModelComparison:
    """Ranking of candidate models by MIRA, with the sharpness companion that closes its blind spot."""

    names: list[str]
    result: MiraResult
    energy: torch.Tensor  # (M,) mean energy score, lower is better
    energy_stderr: torch.Tensor  # (M,)
    calibrated: list[bool]  # |z| <= z_crit
    ranking_mira: list[str]  # by |score - reference| in standard errors
    ranking_with_sharpness: list[str]  # calibrated models by energy score, then the rest by |z|


def compare_models(
    truth: ArrayLike,
    samples: ArrayLike,
    names: list[str] | None = None,
    num_runs: int = 100,
    normalize: bool = True,
    z_crit: float = 3.0,
    generator: torch.Generator | None = None,
) -> ModelComparison:
    """Rank candidate conditionals by MIRA (two-sided) and by MIRA gated + energy-score sharpness.

    MIRA alone cannot tell the prior from the posterior (both put Uniform mass on the radius-defining
    ball and both are calibrated on average), so among models MIRA calls calibrated the sharper
    proper-score winner is preferred.
    """
    truth, samples = check_inputs(truth, samples)
    M = samples.shape[0]
    names = names if names is not None else [f"model_{i}" for i in range(M)]
    if len(names) != M:
        raise ValueError(f"`names` has {len(names)} entries but `samples` holds M = {M} models.")
    if not z_crit > 0:
        raise ValueError(f"`z_crit` must be > 0, got {z_crit}.")
    res = mira(truth, samples, num_runs=num_runs, normalize=normalize, generator=generator)
    es_items = energy_score(truth, samples, normalize=normalize)  # (M, T)
    T = es_items.shape[1]
    energy = es_items.mean(dim=1)
    energy_se = es_items.std(dim=1, unbiased=True) / math.sqrt(T) if T > 1 else torch.zeros(M)
    absz = res.z.abs().tolist()
    calibrated = [bool(a <= z_crit) for a in absz]
    by_z = sorted(range(M), key=lambda i: absz[i])
    good = sorted((i for i in range(M) if calibrated[i]), key=lambda i: float(energy[i]))
    rest = [i for i in by_z if not calibrated[i]]
    logger.debug("MIRA z-scores: %s", dict(zip(names, absz)))
    return ModelComparison(
        names=list(names),
        result=res,
        energy=energy,
        energy_stderr=energy_se,
        calibrated=calibrated,
        ranking_mira=[names[i] for i in by_z],
        ranking_with_sharpness=[names[i] for i in good + rest],
    )
