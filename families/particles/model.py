"""Transformers as interacting particles on the sphere, with a perceptron (MLP) block as external potential.

Paper: Álvarez-López, Geshkovski, Ruiz-Balet, "Perceptrons and localization of attention's mean-field
landscape", arXiv 2601.21366 (ICML 2026). No reference code is public; this file follows the paper's
setup and Geshkovski et al., "A mathematical perspective on Transformers" (arXiv 2312.10794).

Letters: N = number of particles (tokens), D = ambient dimension, K = perceptron units.

The dynamics (Q = K = I, V = s I, unnormalised attention) is
    x_i' = P_{x_i}[ s (1/N) sum_j e^{beta <x_i, x_j>} x_j + grad phi(x_i) ],  P_x = I - x x^T,
with phi(x) = sum_k w_k rho(<a_k, x> + b_k) and rho = relu^2 / 2 (so rho' = relu, the perceptron's
activation, and grad phi = A^T diag(w) relu(A x + b) is a perceptron with tied weights). It is the
Wasserstein gradient *ascent* of
    E(mu) = s/(2 beta) int int e^{beta <x,y>} dmu(x) dmu(y) + int phi dmu,
so along the exact flow dE/dt = (1/N) sum_i |P_{x_i} v_i|^2 >= 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from latent.entry import install_line

from .config import ParticlesConfig

logger = logging.getLogger(__name__)


def _check_points(x: torch.Tensor, name: str = "x") -> None:
    """Raise a clear error for a tensor that is not a finite (N, D) cloud of unit vectors."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D tensor of shape (N, D), got {getattr(x, 'shape', type(x))}."
        )
    if x.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: pass at least one particle.")
    if not torch.isfinite(x).all():
        raise ValueError(f"`{name}` contains NaN or inf; particles must be finite unit vectors.")
    norms = x.norm(dim=-1)
    if (norms - 1).abs().max() > 1e-4:
        raise ValueError(
            f"`{name}` rows must have unit norm (max |norm-1| = {(norms - 1).abs().max():.2e}); "
            "normalise with `x / x.norm(dim=-1, keepdim=True)`."
        )


def sample_sphere(n: int, dim: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw n points uniformly on S^{dim-1} (normalised Gaussians), float64. Returns (N, D)."""
    if n < 1 or dim < 2:
        raise ValueError(f"`n` must be >= 1 and `dim` >= 2, got n={n}, dim={dim}.")
    x = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def tangent(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Project v onto the tangent space of the sphere at x: P_x v = v - <x, v> x. Shapes (N, D)."""
    return v - (x * v).sum(-1, keepdim=True) * x


@dataclass
class Perceptron:
    """phi(x) = sum_k w_k rho(<a_k, x> + b_k) with rho(u) = relu(u)^2 / 2. A: (K, D), b: (K,), w: (K,).

    With `W` (K, D) set, the block is a generic perceptron W^T relu(A x + b) whose output weights are not
    tied to A: its field is then not the gradient of any potential (the contrast to the paper's setting).
    """

    A: torch.Tensor
    b: torch.Tensor
    w: torch.Tensor
    W: torch.Tensor | None = None

    @classmethod
    def random(cls, cfg: ParticlesConfig, generator: torch.Generator | None = None) -> Perceptron:
        """Unit-norm directions a_k, Gaussian biases, output weights w_k ~ scale * N(0, 1) / sqrt(K)."""
        A = sample_sphere(cfg.num_units, cfg.dim, generator)
        b = cfg.bias_std * torch.randn(cfg.num_units, generator=generator, dtype=torch.float64)
        w = cfg.perceptron_scale * torch.randn(cfg.num_units, generator=generator, dtype=torch.float64)
        return cls(A=A, b=b, w=w / cfg.num_units**0.5)

    @classmethod
    def generic(cls, cfg: ParticlesConfig, generator: torch.Generator | None = None) -> Perceptron:
        """Same A, b (and scale) as `random`, but untied output weights W_kj ~ scale * N(0, 1) / sqrt(K)."""
        tied = cls.random(cfg, generator)
        W = cfg.perceptron_scale * torch.randn(
            cfg.num_units, cfg.dim, generator=generator, dtype=torch.float64
        )
        return cls(A=tied.A, b=tied.b, w=torch.zeros_like(tied.w), W=W / cfg.num_units**0.5)

    @property
    def is_gradient(self) -> bool:
        """True for tied weights W = diag(w) A, whose field is grad phi."""
        return self.W is None

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        """Potential phi at each particle. x: (N, D) -> (N,)."""
        if not self.is_gradient:
            raise ValueError("a generic (untied) perceptron has no potential phi; use `Perceptron.random`.")
        pre = x @ self.A.T + self.b  # (N, K)
        return 0.5 * torch.relu(pre).pow(2) @ self.w

    def grad_phi(self, x: torch.Tensor) -> torch.Tensor:
        """The block's field: A^T diag(w) relu(A x + b) = grad phi when tied, W^T relu(A x + b) when generic."""
        pre = x @ self.A.T + self.b  # (N, K)
        if self.W is not None:
            return torch.relu(pre) @ self.W
        return (torch.relu(pre) * self.w) @ self.A


def raw_velocity(x: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None) -> torch.Tensor:
    """Un-projected field s (1/N) sum_j e^{beta<x_i,x_j>} x_j + grad phi(x_i); equals N * dE/dx_i. (N, D)."""
    kernel = torch.exp(cfg.beta * (x @ x.T))  # (N, N)
    v = cfg.interaction * (kernel @ x) / x.shape[0]
    if perceptron is not None:
        v = v + perceptron.grad_phi(x)
    return v


def velocity(x: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None) -> torch.Tensor:
    """Tangent velocity P_x[raw field] of every particle (also the Riemannian gradient of N * E). (N, D)."""
    return tangent(x, raw_velocity(x, cfg, perceptron))


def energy(x: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None) -> float:
    """E(mu_N) = s/(2 beta N^2) sum_ij e^{beta<x_i,x_j>} + (1/N) sum_i phi(x_i), non-decreasing along the flow."""
    n = x.shape[0]
    e = cfg.interaction * torch.exp(cfg.beta * (x @ x.T)).sum() / (2 * cfg.beta * n * n)
    if perceptron is not None:
        if not perceptron.is_gradient:
            return float("nan")  # no energy: the field is not a gradient
        e = e + perceptron.phi(x).mean()
    return float(e)


def riemannian_grad_norm(x: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None) -> float:
    """Max over particles of |P_x grad(dE/dmu)(x)|: zero exactly at critical points of E."""
    return float(velocity(x, cfg, perceptron).norm(dim=-1).max())


@dataclass
class Trajectory:
    """Result of `simulate`: final cloud (N, D), times (S,), energies (S,), max |norm - 1| over the run."""

    x: torch.Tensor
    times: np.ndarray
    energies: np.ndarray
    sphere_drift: float


def simulate(
    x0: torch.Tensor,
    cfg: ParticlesConfig,
    perceptron: Perceptron | None = None,
    record_every: int = 10,
) -> Trajectory:
    """Integrate the particle ODE from x0 up to cfg.t_final and record the energy along the way.

    'euler' is projected Euler followed by renormalisation (a retraction, so the cloud stays on the
    sphere exactly), with `sphere_drift` the largest norm error of a step before its retraction;
    'rk4'/'dopri5' hand the ambient ODE to torchdiffeq, whose drift off the sphere is reported as
    `sphere_drift` (the exact flow is tangent, so any drift is integration error).
    """
    _check_points(x0, "x0")
    if x0.shape[1] != cfg.dim:
        raise ValueError(f"`x0` has dimension {x0.shape[1]} but `cfg.dim` is {cfg.dim}.")
    if record_every < 1:
        raise ValueError(f"`record_every` must be >= 1, got {record_every}.")
    x = x0.to(torch.float64)
    if cfg.integrator == "euler":
        times, energies, drift = [0.0], [energy(x, cfg, perceptron)], 0.0
        for step in range(1, cfg.num_steps + 1):
            x = x + cfg.dt * velocity(x, cfg, perceptron)
            drift = max(drift, float((x.norm(dim=-1) - 1).abs().max()))  # before the retraction
            x = x / x.norm(dim=-1, keepdim=True)
            if step % record_every == 0 or step == cfg.num_steps:
                times.append(step * cfg.dt)
                energies.append(energy(x, cfg, perceptron))
        # A tangent step leaves the sphere by sqrt(1 + dt^2 |v|^2) - 1 = O(dt^2); a field with a normal
        # component would leave it at O(dt). The retraction then puts the cloud back exactly.
        return Trajectory(x=x, times=np.array(times), energies=np.array(energies), sphere_drift=drift)
    return _simulate_torchdiffeq(x, cfg, perceptron, record_every)


def _simulate_torchdiffeq(
    x: torch.Tensor, cfg: ParticlesConfig, perceptron: Perceptron | None, record_every: int
) -> Trajectory:
    """Ambient-space integration with torchdiffeq (no projection back: drift measures solver error)."""
    try:
        from torchdiffeq import odeint
    except ImportError as err:  # optional backend: fail at use and name the fix
        raise ImportError(
            f"integrator 'rk4'/'dopri5' needs torchdiffeq, of the families extra: {install_line('families')}"
        ) from err
    n_rec = max(2, cfg.num_steps // record_every + 1)
    t = torch.linspace(0.0, cfg.t_final, n_rec, dtype=torch.float64)
    opts = {"step_size": cfg.dt} if cfg.integrator == "rk4" else {}
    tol = {} if cfg.integrator == "rk4" else {"rtol": 1e-7, "atol": 1e-9}
    with torch.no_grad():
        path = odeint(
            lambda _t, y: velocity(y, cfg, perceptron), x, t, method=cfg.integrator, options=opts, **tol
        )
    drift = float((path.norm(dim=-1) - 1).abs().max())
    energies = np.array([energy(p, cfg, perceptron) for p in path])
    xf = path[-1] / path[-1].norm(dim=-1, keepdim=True)
    return Trajectory(x=xf, times=t.numpy(), energies=energies, sphere_drift=drift)


@dataclass
class Clusters:
    """Atoms of a particle cloud: labels (N,), centers (C, D) on the sphere, masses (C,), max spread (rad)."""

    labels: np.ndarray
    centers: np.ndarray
    masses: np.ndarray
    spread: float

    @property
    def count(self) -> int:
        """Number of atoms (clusters)."""
        return len(self.masses)

    @property
    def largest(self) -> np.ndarray:
        """Center of the heaviest atom, (D,)."""
        return self.centers[int(np.argmax(self.masses))]


def _components(adj: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of a symmetric boolean adjacency matrix (breadth-first search)."""
    labels = np.full(len(adj), -1)
    n_comp = 0
    for start in range(len(adj)):
        if labels[start] >= 0:
            continue
        frontier = np.array([start])
        labels[start] = n_comp
        while len(frontier):
            nbrs = np.flatnonzero(adj[frontier].any(0) & (labels < 0))
            labels[nbrs] = n_comp
            frontier = nbrs
        n_comp += 1
    return n_comp, labels


def find_clusters(x: torch.Tensor, radius: float = 0.05) -> Clusters:
    """Group particles whose geodesic distance is below `radius` (single linkage) into atoms."""
    _check_points(x)
    if not radius > 0:
        raise ValueError(f"`radius` must be > 0, got {radius}.")
    xn = x.detach().to(torch.float64).numpy()
    ang = np.arccos(np.clip(xn @ xn.T, -1.0, 1.0))  # (N, N) geodesic distances
    n_comp, labels = _components(ang < radius)
    centers, masses, spread = [], [], 0.0
    for c in range(n_comp):
        pts = xn[labels == c]
        m = pts.mean(0)
        m = m / max(np.linalg.norm(m), 1e-12)
        centers.append(m)
        masses.append(len(pts) / len(xn))
        spread = max(spread, float(np.arccos(np.clip(pts @ m, -1, 1)).max()))
    return Clusters(labels=labels, centers=np.array(centers), masses=np.array(masses), spread=spread)


def phi_critical_points(
    perceptron: Perceptron, n_starts: int = 128, steps: int = 500, lr: float = 0.05, seed: int = 0
) -> np.ndarray:
    """Local maxima of phi on the sphere by projected gradient ascent from many starts; (M, D), deduplicated.

    A single Dirac delta_p is a critical point of E iff P_p grad phi(p) = 0 (the attention term e^beta p
    is normal to the sphere), so collapsed atoms should sit at critical points of phi.
    """
    g = torch.Generator().manual_seed(seed)
    x = sample_sphere(n_starts, perceptron.A.shape[1], g)
    for _ in range(steps):
        x = x + lr * tangent(x, perceptron.grad_phi(x))
        x = x / x.norm(dim=-1, keepdim=True)
    cl = find_clusters(x, radius=0.05)
    return cl.centers


def geodesic(u: np.ndarray, v: np.ndarray) -> float:
    """Angle in radians between two unit vectors."""
    return float(np.arccos(np.clip(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)), -1.0, 1.0)))
