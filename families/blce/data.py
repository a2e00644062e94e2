"""Synthetic linear (and logistic) contextual bandit environments with known theta*."""

from __future__ import annotations

import numpy as np


class LinearContextualEnv:
    """K arms per round, features uniform in [-1, 1]^d renormalised to the unit sphere, redrawn every round.

    theta* is uniform on the sphere of radius `theta_norm`. Linear rewards: <x, theta*> + N(0, sigma^2);
    logistic rewards (glm=True): Bernoulli(sigmoid(<x, theta*>)). Regret is the pseudo-regret
    (expected reward of the best arm minus that of the played arm).
    """

    def __init__(
        self,
        num_arms: int,
        dim: int,
        noise_std: float = 0.1,
        glm: bool = False,
        theta_norm: float = 1.0,
        seed: int = 0,
    ) -> None:
        if num_arms < 1 or dim < 1:
            raise ValueError(f"Need num_arms >= 1 and dim >= 1, got {num_arms} and {dim}.")
        if noise_std < 0 or theta_norm <= 0:
            raise ValueError("`noise_std` must be >= 0 and `theta_norm` > 0.")
        self.num_arms, self.dim, self.noise_std, self.glm = num_arms, dim, noise_std, glm
        self.rng = np.random.default_rng(seed)
        theta = self.rng.standard_normal(dim)
        self.theta = theta_norm * theta / np.linalg.norm(theta)

    def contexts(self) -> np.ndarray:
        """(K, d) features of this round's arms."""
        x = self.rng.uniform(-1.0, 1.0, size=(self.num_arms, self.dim))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def mean(self, arms: np.ndarray) -> np.ndarray:
        z = arms @ self.theta
        return 1.0 / (1.0 + np.exp(-z)) if self.glm else z

    def reward(self, x: np.ndarray) -> float:
        m = float(self.mean(x[None])[0])
        if self.glm:
            return float(self.rng.uniform() < m)
        return m + self.noise_std * float(self.rng.standard_normal())


def separable_env(dim: int = 3, gap: float = 0.5, seed: int = 0) -> LinearContextualEnv:
    """A trivially separable instance: arm 0 is theta* itself, the others sit `gap` lower in reward."""
    env = LinearContextualEnv(num_arms=4, dim=dim, noise_std=0.05, seed=seed)
    theta = env.theta

    def contexts() -> np.ndarray:
        others = env.rng.standard_normal((3, dim))
        others -= np.outer(others @ theta, theta)  # orthogonal part
        others /= np.linalg.norm(others, axis=1, keepdims=True)
        # reward of each other arm is 1 - gap, still on the unit sphere
        others = (1 - gap) * theta + np.sqrt(1 - (1 - gap) ** 2) * others
        return np.vstack([theta, others])

    env.contexts = contexts  # type: ignore[method-assign]
    return env


def run_bandit(agent, env: LinearContextualEnv, horizon: int) -> np.ndarray:  # noqa: ANN001 - any agent
    """Play `horizon` rounds; return the per-round pseudo-regret (horizon,)."""
    regret = np.empty(horizon)
    for t in range(horizon):
        arms = env.contexts()
        a = agent.select(arms)
        means = env.mean(arms)
        regret[t] = means.max() - means[a]
        agent.observe(arms[a], env.reward(arms[a]))
    return regret
