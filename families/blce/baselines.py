"""Peers of BLCE with the same select/observe interface: LinUCB (every round), rarely-switching OFUL,
fixed-batch LinUCB, and a wrapper around `mabwiser`'s (disjoint) LinUCB.

`obp` (whose LinUCB has a fixed `batch_size` refresh) does not install next to numpy 2.x, so fixed
batches are written here; `mabwiser` is imported inside its wrapper only.
"""

from __future__ import annotations

import math

import numpy as np

from .model import sherman_morrison


def oful_width(t: int, dim: int, ridge: float, noise_std: float, theta_norm: float, delta: float) -> float:
    """Abbasi-Yadkori et al. (2011) self-normalized width, with log det V bounded by d log(1 + t/(ridge d))."""
    return (
        noise_std * math.sqrt(2 * math.log(1 / delta) + dim * math.log(1 + t / (ridge * dim)))
        + math.sqrt(ridge) * theta_norm
    )


class LinUCB:
    """Optimistic linear bandit. `refresh` decides when the acting estimate is recomputed:
    'every' (fully sequential OFUL/LinUCB), 'det' (rarely switching: when det V doubles),
    or an int b (fixed batches of b rounds). `width=None` uses the OFUL width, a float fixes it.
    """

    def __init__(
        self,
        dim: int,
        horizon: int,
        refresh: str | int = "every",
        ridge: float = 1.0,
        noise_std: float = 0.1,
        theta_norm: float = 1.0,
        width: float | None = None,
        switch_factor: float = 2.0,
    ) -> None:
        if not (refresh in ("every", "det") or (isinstance(refresh, int) and refresh >= 1)):
            raise ValueError(f"`refresh` must be 'every', 'det' or a positive int, got {refresh!r}.")
        if ridge <= 0 or horizon < 1:
            raise ValueError("`ridge` must be > 0 and `horizon` >= 1.")
        self.dim, self.horizon, self.refresh = dim, horizon, refresh
        self.ridge, self.noise_std, self.theta_norm, self.width = ridge, noise_std, theta_norm, width
        self.switch_factor = switch_factor
        self.v_inv = np.eye(dim) / ridge  # current data
        self.b = np.zeros(dim)
        self.logdet = dim * math.log(ridge)
        self.act_inv, self.act_theta = self.v_inv.copy(), np.zeros(dim)  # what the policy acts with
        self.act_logdet = self.logdet
        self.t = 0
        self.num_updates = 0

    def select(self, arms: np.ndarray) -> int:
        arms = np.asarray(arms, dtype=float)
        if arms.ndim != 2 or arms.shape[1] != self.dim:
            raise ValueError(f"`arms` must have shape (K, {self.dim}), got {arms.shape}.")
        beta = (
            self.width
            if self.width is not None
            else oful_width(self.t, self.dim, self.ridge, self.noise_std, self.theta_norm, 1.0 / self.horizon)
        )
        bonus = np.sqrt(np.einsum("ij,jk,ik->i", arms, self.act_inv, arms))
        return int(np.argmax(arms @ self.act_theta + beta * bonus))

    def observe(self, x: np.ndarray, reward: float) -> None:
        x = np.asarray(x, dtype=float)
        self.logdet += math.log1p(float(x @ self.v_inv @ x))  # matrix determinant lemma
        self.v_inv = sherman_morrison(self.v_inv, x)
        self.b += reward * x
        self.t += 1
        due = (
            self.refresh == "every"
            or (self.refresh == "det" and self.logdet > self.act_logdet + math.log(self.switch_factor))
            or (isinstance(self.refresh, int) and self.t % self.refresh == 0)
        )
        if due:
            self.act_inv, self.act_theta = self.v_inv.copy(), self.v_inv @ self.b
            self.act_logdet = self.logdet
            self.num_updates += 1


class MabwiserDisjointLinUCB:
    """mabwiser's LinUCB (one ridge model per arm) on the disjoint problem with block features.

    An arm's features are e_a (x) c_t (the shared context placed in block a), which is the one case
    where a per-arm model and a shared-theta model are the same problem.
    """

    def __init__(
        self, num_arms: int, context_dim: int, alpha: float = 1.0, ridge: float = 1.0, seed: int = 0
    ) -> None:
        from mabwiser.mab import MAB, LearningPolicy

        self.num_arms, self.context_dim = num_arms, context_dim
        self.mab = MAB(list(range(num_arms)), LearningPolicy.LinUCB(alpha=alpha, l2_lambda=ridge), seed=seed)
        self.fitted = False
        self._seen: list[tuple[int, float, np.ndarray]] = []  # warm-up pulls, one per arm
        self.num_updates = 0

    def _context(self, arms: np.ndarray) -> np.ndarray:
        return arms[0, : self.context_dim]  # block 0 of arm 0 holds the context

    def select(self, arms: np.ndarray) -> int:
        if not self.fitted:  # mabwiser needs one fit before predicting: pull every arm once
            return len(self._seen) % self.num_arms
        return int(self.mab.predict([self._context(arms)]))

    def observe(self, x: np.ndarray, reward: float) -> None:
        block = int(np.argmax(np.abs(x.reshape(self.num_arms, self.context_dim)).sum(axis=1)))
        ctx = x.reshape(self.num_arms, self.context_dim)[block]
        if not self.fitted:
            self._seen.append((block, reward, ctx))
            if len(self._seen) == self.num_arms:  # warm start: every arm once, then fit
                d, r, c = zip(*self._seen)
                self.mab.fit(list(d), list(r), np.asarray(c))
                self.fitted = True
        else:
            self.mab.partial_fit([block], [reward], ctx[None])
        self.num_updates += 1


def kron_arms(context: np.ndarray, num_arms: int) -> np.ndarray:
    """(K, K*d) block features e_a (x) c for the disjoint problem."""
    d = context.size
    out = np.zeros((num_arms, num_arms * d))
    for a in range(num_arms):
        out[a, a * d : (a + 1) * d] = context
    return out
