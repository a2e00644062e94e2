"""Conformal policy control (CPC): let a safe policy regulate an optimized, untested one.

Paper: Prinster, Fannjiang, Park, Cho, Liu, Saria, Stanton, "Conformal Policy Control",
arXiv 2603.02196. Reference code: github.com/samuelstanton/conformal-policy-control (read, not copied).

With safe policy pi_0, optimized policy pi_t and likelihood ratio r(x) = pi_t(x) / pi_0(x):

    pi_beta(x) = min(pi_t(x), beta * pi_0(x)) / psi(beta),   psi(beta) = E_{pi_0}[min(r, beta)]

beta -> 0 gives pi_0 and beta = inf gives pi_t. beta is chosen by weighted conformal risk control on
calibration draws (x_i, L_i) from pi_0: the weights are w_i = pi_beta(x_i) / pi_0(x_i), the unseen
test point is counted at the maximum loss B with the largest weight any point can have, and

    bound(beta) = (sum_i w_i L_i + w_test B) / (sum_i w_i + w_test).

The grid is scanned from safe to aggressive and the search stops at the *first* beta whose bound
exceeds alpha, returning the previous one (generalized CRC / fixed-sequence rule). That stopping
rule, not monotonicity of the loss in beta, is what carries the finite-sample guarantee
E[L(X)] <= alpha for X ~ pi_beta_hat, so it also holds for non-monotone bounded losses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .config import ConformalControlConfig

logger = logging.getLogger(__name__)


class Policy(Protocol):
    """Anything that samples and scores exact log-likelihoods (a Markov chain, an LLM, ...)."""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray: ...

    def log_prob(self, x: np.ndarray) -> np.ndarray: ...


def estimate_psi(beta: float, log_ratio_safe: np.ndarray, log_ratio_opt: np.ndarray | None = None) -> float:
    """psi(beta) = E_{pi_0}[min(r, beta)] = E_{pi_t}[min(1, beta / r)] by importance-weighted Monte Carlo.

    Both integrands are bounded (by beta and by 1), so we use the pi_0 estimate for beta <= 1 and
    the pi_t estimate above 1, whichever has the smaller bound, when pi_t samples are given.
    """
    if beta <= 0:
        return 0.0
    if math.isinf(beta):
        return 1.0
    log_beta = math.log(beta)
    if log_ratio_opt is not None and beta > 1:
        return float(np.exp(np.minimum(0.0, log_beta - log_ratio_opt)).mean())
    return float(np.exp(np.minimum(log_ratio_safe, log_beta)).mean())


def beta_grid(log_ratios: np.ndarray, num_grid: int) -> np.ndarray:
    """Ascending candidate betas: 0, quantiles of the observed ratios, inf (safe -> aggressive)."""
    if log_ratios.size == 0:
        raise ValueError("`log_ratios` is empty; draw some proposals to place the beta grid.")
    levels = np.linspace(0.0, 1.0, max(num_grid - 2, 1))
    inner = np.unique(np.exp(np.quantile(log_ratios, levels)))
    return np.concatenate([[0.0], inner[inner > 0], [np.inf]])


def weighted_bound(losses: np.ndarray, log_w: np.ndarray, log_w_test: float, loss_bound: float) -> float:
    """(sum w_i L_i + w_test B) / (sum w_i + w_test), computed from log-weights without overflow."""
    top = max(float(log_w.max()) if log_w.size else -np.inf, log_w_test)
    w = np.exp(log_w - top)
    w_test = math.exp(log_w_test - top)
    return float((w @ losses + w_test * loss_bound) / (w.sum() + w_test))


def fixed_sequence_select(bounds: np.ndarray, alpha: float) -> int:
    """Index of the last grid point before the first bound above alpha; -1 if the first one fails."""
    above = np.flatnonzero(bounds > alpha)
    return (int(above[0]) - 1) if above.size else len(bounds) - 1


@dataclass
class CalibrationResult:
    """What the beta search saw and chose."""

    beta: float
    psi: float
    grid: np.ndarray  # (G,) candidate betas, ascending
    bounds: np.ndarray  # (G,) weighted risk bound per beta
    index: int  # position of the chosen beta; -1 when not even pi_0 is certified
    # False: bound(0) > alpha. The returned pi_0 then carries no E[L] <= alpha guarantee: abstain to keep
    # it, or accept the weaker alpha + delta_n bound of `boundary.fallback_excess`.
    certified: bool
    direction: str


def calibrate_beta(
    cal_log_p0: np.ndarray,
    cal_log_pt: np.ndarray,
    cal_losses: np.ndarray,
    prop_log_ratio_safe: np.ndarray,
    prop_log_ratio_opt: np.ndarray | None,
    alpha: float,
    loss_bound: float = 1.0,
    num_grid: int = 50,
    max_log_ratio: float | None = None,
    test_weight_scale: float = 1.0,
    direction: str = "safe_first",
) -> CalibrationResult:
    """Choose beta by weighted conformal risk control on calibration draws from pi_0.

    Args:
        cal_log_p0, cal_log_pt (`ndarray` of shape (n,)): log pi_0 and log pi_t of the calibration points.
        cal_losses (`ndarray` of shape (n,)): their losses, in [0, loss_bound].
        prop_log_ratio_safe (`ndarray`): log r of fresh pi_0 draws (psi estimate and grid).
        prop_log_ratio_opt (`ndarray`, *optional*): log r of fresh pi_t draws (psi for beta > 1, grid).
        max_log_ratio (`float`, *optional*): sup_x log r(x); if None the largest proposal ratio
            times `test_weight_scale` is plugged in, as the reference code does.
        direction (`str`): "safe_first" is CPC's fixed-sequence rule. "aggressive_first" takes the
            most aggressive beta whose bound is <= alpha anywhere on the grid, which is standard
            CRC's inf rule and is only valid for losses monotone in beta (kept as a baseline).
    """
    cal_losses = np.asarray(cal_losses, dtype=float)
    n = cal_losses.shape[0]
    if not (cal_log_p0.shape == cal_log_pt.shape == (n,)):
        raise ValueError(
            f"Calibration arrays disagree: log_p0 {cal_log_p0.shape}, log_pt {cal_log_pt.shape}, losses {(n,)}."
        )
    if direction not in ("safe_first", "aggressive_first"):
        raise ValueError(f"`direction` must be 'safe_first' or 'aggressive_first', got {direction!r}.")
    cal_log_r = cal_log_pt - cal_log_p0
    all_props = (
        prop_log_ratio_safe
        if prop_log_ratio_opt is None
        else np.concatenate([prop_log_ratio_safe, prop_log_ratio_opt])
    )
    grid = beta_grid(all_props, num_grid)
    if max_log_ratio is None:
        max_log_ratio = float(all_props.max()) + math.log(test_weight_scale)
    bounds = np.empty(grid.size)
    psis = np.empty(grid.size)
    for g, beta in enumerate(grid):
        if beta == 0.0:  # pi_beta -> pi_0: every weight is 1
            log_w, log_w_test, psi = np.zeros(n), 0.0, 0.0
        else:
            psi = estimate_psi(beta, prop_log_ratio_safe, prop_log_ratio_opt)
            log_beta = math.log(beta) if math.isfinite(beta) else np.inf
            log_w = np.minimum(cal_log_r, log_beta) - math.log(psi)  # pi_beta / pi_0 at the cal points
            log_w_test = min(max_log_ratio, log_beta) - math.log(psi)  # the largest possible weight
        psis[g] = psi
        bounds[g] = weighted_bound(cal_losses, log_w, log_w_test, loss_bound)
    if direction == "safe_first":
        idx = fixed_sequence_select(bounds, alpha)
    else:
        ok = np.flatnonzero(bounds <= alpha)
        idx = int(ok[-1]) if ok.size else -1
    certified = idx >= 0
    if not certified:
        logger.warning(
            "Even the safe policy's bound %.3f exceeds alpha=%.3f; returning pi_0 uncertified. The "
            "guarantee E[L] <= alpha needs you to abstain here; deploying pi_0 anyway is only bounded by "
            "alpha + delta_n (see `boundary.fallback_excess`).",
            bounds[0],
            alpha,
        )
    chosen = max(idx, 0)
    return CalibrationResult(
        beta=float(grid[chosen]),
        psi=float(psis[chosen]) if grid[chosen] > 0 else 0.0,
        grid=grid,
        bounds=bounds,
        index=idx,
        certified=certified,
        direction=direction,
    )


@dataclass
class ConstrainedPolicy:
    """pi_beta = min(pi_t, beta pi_0) / psi, with exact rejection sampling (no envelope constant needed)."""

    safe: Policy
    optimized: Policy
    beta: float
    psi: float
    last_acceptance: float = field(default=float("nan"))

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """Log-likelihood under pi_beta (exact up to the Monte Carlo estimate of psi)."""
        if self.beta == 0.0:
            return self.safe.log_prob(x)
        if math.isinf(self.beta):
            return self.optimized.log_prob(x)
        clipped = np.minimum(self.optimized.log_prob(x), math.log(self.beta) + self.safe.log_prob(x))
        return clipped - math.log(self.psi)

    def sample(self, n: int, rng: np.random.Generator, max_rounds: int = 10_000) -> np.ndarray:
        """Draw n samples from pi_beta by rejection.

        From pi_t, accept with min(1, beta / r) (acceptance rate psi); from pi_0, accept with
        min(1, r / beta) (rate psi / beta). We propose from pi_t when beta >= 1, else from pi_0,
        which always picks the proposal with the higher acceptance rate.
        """
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"`n` must be a positive int, got {n!r}.")
        if self.beta == 0.0:
            return self.safe.sample(n, rng)
        if math.isinf(self.beta):
            return self.optimized.sample(n, rng)
        use_opt = self.beta >= 1.0
        proposal = self.optimized if use_opt else self.safe
        log_beta = math.log(self.beta)
        kept, drawn, total = [], 0, 0
        for _ in range(max_rounds):
            batch = proposal.sample(max(2 * n, 64), rng)
            log_r = self.optimized.log_prob(batch) - self.safe.log_prob(batch)
            log_acc = np.minimum(0.0, log_beta - log_r) if use_opt else np.minimum(0.0, log_r - log_beta)
            accept = np.log(rng.uniform(size=log_acc.shape)) < log_acc
            kept.append(batch[accept])
            drawn += int(accept.sum())
            total += len(batch)
            if drawn >= n:
                break
        else:
            raise RuntimeError(
                f"Rejection sampling accepted only {drawn} of {total} proposals; psi may be ~0."
            )
        self.last_acceptance = drawn / total
        return np.concatenate(kept)[:n]


class ConformalPolicyController:
    """Calibrates beta from safe-policy data and returns the constrained policy.

    Example:
        ```python
        ctrl = ConformalPolicyController(safe, optimized, ConformalControlConfig(alpha=0.1))
        policy = ctrl.calibrate(cal_x, cal_losses)
        designs = policy.sample(100, np.random.default_rng(0))
        ```
    """

    def __init__(self, safe: Policy, optimized: Policy, config: ConformalControlConfig | None = None) -> None:
        self.safe = safe
        self.optimized = optimized
        self.config = config or ConformalControlConfig()
        self.calibration: CalibrationResult | None = None

    def calibrate(
        self,
        cal_x: np.ndarray,
        cal_losses: np.ndarray,
        rng: np.random.Generator | None = None,
        direction: str = "safe_first",
    ) -> ConstrainedPolicy:
        """Pick beta on calibration draws (cal_x ~ pi_0) with their losses; return pi_beta."""
        cfg = self.config
        cal_losses = np.asarray(cal_losses, dtype=float)
        if cal_losses.ndim != 1 or cal_losses.size == 0:
            raise ValueError(f"`cal_losses` must be a non-empty 1-D array, got shape {cal_losses.shape}.")
        if len(cal_x) != cal_losses.size:
            raise ValueError(f"`cal_x` has {len(cal_x)} rows but `cal_losses` has {cal_losses.size}.")
        if not np.isfinite(cal_losses).all():
            raise ValueError("`cal_losses` contains NaN or inf; losses must be bounded numbers.")
        if cal_losses.min() < 0 or cal_losses.max() > cfg.loss_bound:
            raise ValueError(
                f"Losses must lie in [0, loss_bound={cfg.loss_bound}], got range "
                f"[{cal_losses.min()}, {cal_losses.max()}]; rescale them or raise `loss_bound`."
            )
        rng = rng if rng is not None else np.random.default_rng(cfg.seed)
        props_safe = self.safe.sample(cfg.num_proposals, rng)
        props_opt = self.optimized.sample(cfg.num_proposals, rng)
        lr_safe = self.optimized.log_prob(props_safe) - self.safe.log_prob(props_safe)
        lr_opt = self.optimized.log_prob(props_opt) - self.safe.log_prob(props_opt)
        max_lr = None
        if cfg.test_weight == "exact":
            sup = getattr(self.optimized, "max_log_ratio_over", None)
            if sup is None:
                raise ValueError(
                    "`test_weight='exact'` needs `optimized.max_log_ratio_over(safe)`; "
                    "set ConformalControlConfig(test_weight='empirical') for black-box policies."
                )
            max_lr = float(sup(self.safe))
        self.calibration = calibrate_beta(
            self.safe.log_prob(cal_x),
            self.optimized.log_prob(cal_x),
            cal_losses,
            lr_safe,
            lr_opt,
            alpha=cfg.alpha,
            loss_bound=cfg.loss_bound,
            num_grid=cfg.num_grid,
            max_log_ratio=max_lr,
            test_weight_scale=cfg.test_weight_scale,
            direction=direction,
        )
        res = self.calibration
        logger.info("CPC chose beta=%.4g (grid position %d of %d)", res.beta, res.index, res.grid.size)
        return ConstrainedPolicy(self.safe, self.optimized, res.beta, res.psi)


def calibrate_beta_sequential(
    cal_log_new: np.ndarray,
    cal_log_prev: np.ndarray,
    cal_log_mix: np.ndarray,
    cal_losses: np.ndarray,
    grid: np.ndarray,
    max_log_weight: Callable[[float], float],
    alpha: float,
    loss_bound: float = 1.0,
) -> CalibrationResult:
    """One later round of the sequential procedure: constrain pi_new against the previous round's
    deployed policy pi_prev, pi_beta = min(pi_new, beta pi_prev) / psi, calibrating on all earlier
    rounds' data, whose density is the mixture m of the policies that produced it.

    The weights are pi_beta / m; psi cancels from the self-normalized bound exactly as in round one.
    `max_log_weight(beta)` must return sup_x log(min(pi_new, beta pi_prev)(x) / m(x)) for the test point
    (exact on enumerable spaces; a proposal maximum otherwise, as the reference code does).
    The scan and the stopping rule are those of `calibrate_beta`; `certified=False` means abstain.
    """
    cal_losses = np.asarray(cal_losses, dtype=float)
    n = cal_losses.shape[0]
    if not (cal_log_new.shape == cal_log_prev.shape == cal_log_mix.shape == (n,)):
        raise ValueError(
            "`cal_log_new`, `cal_log_prev`, `cal_log_mix` and `cal_losses` must all have length n."
        )
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or grid[0] != 0.0 or np.any(np.diff(grid) <= 0):
        raise ValueError("`grid` must be strictly increasing and start at 0 (the previous policy itself).")
    bounds = np.empty(grid.size)
    for g, beta in enumerate(grid):
        log_beta = math.log(beta) if beta > 0 else -np.inf
        if beta == 0.0:  # pi_beta -> pi_prev
            log_w = cal_log_prev - cal_log_mix
        else:
            log_w = np.minimum(cal_log_new, log_beta + cal_log_prev) - cal_log_mix
        bounds[g] = weighted_bound(cal_losses, log_w, max_log_weight(float(beta)), loss_bound)
    idx = fixed_sequence_select(bounds, alpha)
    chosen = max(idx, 0)
    return CalibrationResult(
        beta=float(grid[chosen]), psi=float("nan"), grid=grid, bounds=bounds, index=idx,
        certified=idx >= 0, direction="safe_first",
    )  # fmt: skip
