"""BLCE / BLCE-G: linear contextual bandits that update their parameter estimate only O(log log T) times.

Paper: Sanghoon Yu, Min-hwan Oh, "Practical and Optimal Algorithm for Linear Contextual Bandits with
Rare Parameter Updates", ICML 2026, arXiv 2606.00984. No public code; the grid and widths below follow
the team's research notes on the paper and are marked where they are our reconstruction.

Shapes: K arms per round, d features. Rounds are split by a static grid T_1 < T_2 < ... < T_M = T.
Inside interval l the estimate is frozen, but the learner still adapts to contexts without rewards:
it keeps H = lambda I + sum x x^T over the interval's chosen arms (inverse by Sherman-Morrison, O(d^2))
and explores where ||x||_{H^-1} is largest. Arms are filtered by nested elimination with every earlier
estimate theta_1..theta_{l-1} (each fitted on its own interval's data only, so the widths are
fixed-design widths). At the end of interval l the ridge estimate of that interval is stored and H reset.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from .config import BLCEConfig

logger = logging.getLogger(__name__)


def static_grid(horizon: int) -> list[int]:
    """End points T_1 < ... < T_M = T of the update intervals.

    Reconstruction from the research notes (verify against the paper): with g = log2 log2 T,
    T_1 = ceil(sqrt(T) / g) + 1 and T_l = min(T, T_{l-1} + ceil(T^(1 - 2^-l) / g) + 2).
    Since T^(1 - 2^-l) reaches T / 2 once 2^-l log2 T <= 1, M is O(log log T).
    """
    if horizon < 16:
        raise ValueError(f"`horizon` must be >= 16 for the log log grid, got {horizon}.")
    g = math.log2(math.log2(horizon))
    ends = [min(horizon, math.ceil(math.sqrt(horizon) / g) + 1)]
    level = 2
    while ends[-1] < horizon:
        ends.append(min(horizon, ends[-1] + math.ceil(horizon ** (1 - 2.0**-level) / g) + 2))
        level += 1
    return ends


def grid_size_bound(horizon: int) -> int:
    """An explicit O(log log T) bound on len(static_grid(T)).

    With g = log2 log2 T: from level l0 = ceil(log2 log2 T) on, 2^-l log2 T <= 1 so every interval
    is at least T / (2 g) long, and at most ceil(2 g) of them fit in T; add the first l0 intervals.
    """
    g = math.log2(math.log2(horizon))
    return math.ceil(g) + math.ceil(2 * g) + 1


def sherman_morrison(inv: np.ndarray, x: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """(A + w x x^T)^-1 from A^-1 in O(d^2)."""
    ax = inv @ x
    return inv - (weight / (1.0 + weight * (x @ ax))) * np.outer(ax, ax)


def g_optimal_design(arms: np.ndarray, iters: int = 30, reg: float = 1e-6) -> np.ndarray:
    """Near G-optimal design over the rows of `arms` (n, d) by Frank-Wolfe / Kiefer-Wolfowitz steps.

    Minimizes max_x ||x||^2_{A(pi)^-1}, A(pi) = sum pi_i x_i x_i^T; at the optimum the max equals d.
    """
    n, d = arms.shape
    pi = np.full(n, 1.0 / n)
    for _ in range(iters):
        A = (arms * pi[:, None]).T @ arms + reg * np.eye(d)
        g = np.einsum("ij,jk,ik->i", arms, np.linalg.inv(A), arms)  # (n,) ||x_i||^2_{A^-1}
        j = int(np.argmax(g))
        if g[j] <= d * (1 + 1e-3):
            break
        step = (g[j] / d - 1.0) / (g[j] - 1.0)
        pi = (1 - step) * pi
        pi[j] += step
    return pi


@dataclass
class _Estimate:
    theta: np.ndarray  # (d,)
    gram_inv: np.ndarray  # (d, d) inverse Gram of the interval it was fitted on


class BLCE:
    """BLCE (design='uncertainty') and BLCE-G (design='g_optimal'), optionally for logistic rewards.

    design='strict_g' is the strictly batched baseline on the same grid and elimination: exploration
    samples a near G-optimal design of the current context's survivors (as strictly batched static-grid
    methods in the BatchLinUCB-DG line do), so no action depends on the interval's earlier rounds.

    Example:
        ```python
        agent = BLCE(dim=5, config=BLCEConfig(horizon=1000))
        arm = agent.select(arms)          # arms: (K, d)
        agent.observe(arms[arm], reward)  # H moves every round, theta only on the grid
        ```
    """

    def __init__(self, dim: int, config: BLCEConfig | None = None) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"`dim` must be a positive int, got {dim!r}.")
        self.config = cfg = config or BLCEConfig()
        self.dim = dim
        T = cfg.horizon
        if cfg.ridge is not None:
            self.ridge = cfg.ridge
        elif cfg.glm:
            self.ridge = 0.25 * (dim + math.log(T))  # R^2 (d + log T) with R = 1/2 for Bernoulli rewards
        else:
            self.ridge = math.log(dim * T) if cfg.design == "g_optimal" else 1.0
        self.grid = static_grid(T)
        self.rng = np.random.default_rng(cfg.seed)
        self.estimates: list[_Estimate] = []
        self.t = 0
        self.num_updates = 0
        self._start_interval()

    # ----- bookkeeping -------------------------------------------------------------------------
    def _start_interval(self) -> None:
        self.gram_inv = np.eye(self.dim) / self.ridge  # H^-1, updated without rewards
        self.xs: list[np.ndarray] = []
        self.rs: list[float] = []

    @property
    def interval(self) -> int:
        """Index l (0-based) of the current interval."""
        return len(self.estimates)

    def _position(self) -> float:
        """Fraction of the current interval already played."""
        start = self.grid[self.interval - 1] if self.interval > 0 else 0
        end = self.grid[min(self.interval, len(self.grid) - 1)]
        return (self.t - start) / max(end - start, 1)

    def _width(self, num_arms: int) -> float:
        """Confidence multiplier: min of a union bound over arms and a sqrt(d) covering bound (ours)."""
        cfg = self.config
        log_term = 2 * math.log(max(len(self.grid), 2) * cfg.horizon**2)
        noise = 0.5 if cfg.glm else cfg.noise_std
        small_k = math.sqrt(log_term + 2 * math.log(num_arms))
        large_k = math.sqrt(log_term + self.dim * math.log(6.0))
        return cfg.width_scale * (noise * min(small_k, large_k) + math.sqrt(self.ridge) * cfg.theta_norm)

    # ----- acting ------------------------------------------------------------------------------
    def survivors(self, arms: np.ndarray) -> np.ndarray:
        """Indices kept by nested elimination with every stored estimate, oldest first."""
        keep = np.arange(len(arms))
        gamma = self._width(len(arms))
        for est in self.estimates:
            cand = arms[keep]
            means = cand @ est.theta
            eps = gamma * math.sqrt(float(np.einsum("ij,jk,ik->i", cand, est.gram_inv, cand).max()))
            keep = keep[means >= means.max() - 2 * eps]
        return keep

    def select(self, arms: np.ndarray) -> int:
        """Index of the arm to play among `arms` (K, d)."""
        arms = np.asarray(arms, dtype=float)
        if arms.ndim != 2 or arms.shape[1] != self.dim or len(arms) == 0:
            raise ValueError(f"`arms` must have shape (K, {self.dim}) with K >= 1, got {arms.shape}.")
        if not np.isfinite(arms).all():
            raise ValueError("`arms` contains NaN or inf features.")
        if self.t >= self.config.horizon:
            raise ValueError(
                f"All {self.config.horizon} rounds are played; raise `horizon` for a longer run."
            )
        keep = self.survivors(arms)
        cand = arms[keep]
        c = self.config.explore_frac
        pos = self._position()
        design_share = c * c if self.interval > 0 else c  # BLCE-G's design segment (interval 1: c)
        explore_share = c if self.interval > 0 else 1.0  # BLCE explores the whole first interval
        if self.config.design == "strict_g":  # strictly batched: the rule sees only this context
            if pos < explore_share:  # and the frozen estimates, never this interval's history
                pi = g_optimal_design(cand, self.config.fw_iters)
                return int(keep[self.rng.choice(len(cand), p=pi / pi.sum())])
            return int(keep[int(np.argmax(cand @ self.estimates[-1].theta))])
        if self.config.design == "g_optimal" and pos < design_share:
            pi = g_optimal_design(cand, self.config.fw_iters)
            return int(keep[self.rng.choice(len(cand), p=pi / pi.sum())])
        if pos < explore_share:
            unc = np.einsum("ij,jk,ik->i", cand, self.gram_inv, cand)  # ||x||^2_{H^-1}
            return int(keep[int(np.argmax(unc))])
        return int(keep[int(np.argmax(cand @ self.estimates[-1].theta))])

    def observe(self, x: np.ndarray, reward: float) -> None:
        """Record the played arm's features and reward; refit only when the grid says so."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.dim,) or not np.isfinite(x).all() or not math.isfinite(reward):
            raise ValueError(f"`x` must be a finite ({self.dim},) vector and `reward` a finite number.")
        weight = 1.0
        if self.config.glm:  # curvature of the logistic link at the latest estimate
            z = float(x @ self.estimates[-1].theta) if self.estimates else 0.0
            weight = _sigmoid(z) * (1 - _sigmoid(z))
        self.gram_inv = sherman_morrison(self.gram_inv, x, weight)
        self.xs.append(x)
        self.rs.append(float(reward))
        self.t += 1
        if self.interval < len(self.grid) - 1 and self.t == self.grid[self.interval]:
            self._refit()

    def _refit(self) -> None:
        X, r = np.asarray(self.xs), np.asarray(self.rs)
        if self.config.glm:
            theta = logistic_mle(X, r, self.ridge)
            w = _sigmoid(X @ theta) * (1 - _sigmoid(X @ theta))
            gram_inv = np.linalg.inv(self.ridge * np.eye(self.dim) + (X * w[:, None]).T @ X)
        else:
            gram_inv = self.gram_inv
            theta = gram_inv @ (X.T @ r)  # ridge on this interval only
        self.estimates.append(_Estimate(theta, gram_inv))
        self.num_updates += 1
        logger.debug(
            "interval %d ended at t=%d: parameter update %d", self.interval, self.t, self.num_updates
        )
        self._start_interval()


def _sigmoid(z: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-z))


def logistic_mle(X: np.ndarray, r: np.ndarray, ridge: float, iters: int = 50) -> np.ndarray:
    """Ridge-penalised logistic regression by Newton's method (d is small, so this is exact and fast)."""
    theta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = _sigmoid(X @ theta)
        grad = X.T @ (p - r) + ridge * theta
        hess = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-8:
            break
    return theta
