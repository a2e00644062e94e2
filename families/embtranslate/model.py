"""Embedding translation: base maps, our hierarchical mixture of low-rank experts (HMoE), and a
geometry-aware confidence derived from a triangle-inequality error bound (composable along chains).

Paper: Beining Yang, Yang Cao, "Generalizable and Composable Multi-Model Embedding Translation",
ICML 2026 (OpenReview qmfp2eqYD1). The HMoE and the bound here are our reconstruction from the abstract,
kept as an ablation; the reference implementation's method is in `hmoe_lora.py` (see README).

Shapes: N = vectors, Dx = source dim, Dy = target dim, R = regions, E = experts per region, r = rank.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import EmbTranslateConfig

logger = logging.getLogger(__name__)
Translate = Callable[[np.ndarray], np.ndarray]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def check_pairs(X: np.ndarray, Y: np.ndarray | None = None) -> None:
    """Raise ValueError for non-2-D, empty, mismatched or non-finite anchor arrays."""
    for name, A in (("X", X), ("Y", Y)):
        if A is None:
            continue
        if not isinstance(A, np.ndarray) or A.ndim != 2 or len(A) == 0:
            raise ValueError(
                f"`{name}` must be a non-empty (N, D) numpy array, got {getattr(A, 'shape', type(A))}."
            )
        if not np.isfinite(A).all():
            raise ValueError(f"`{name}` contains NaN or inf; drop or re-embed those rows.")
    if Y is not None and len(X) != len(Y):
        raise ValueError(f"`X` and `Y` must be paired row by row, got {len(X)} and {len(Y)} rows.")


# ----------------------------------------------------------------------------------------------
# Linear base maps


@dataclass
class LinearMap:
    """y = normalize((x - mx) W + my): an affine map fitted on paired anchors."""

    W: np.ndarray  # (Dx, Dy)
    mx: np.ndarray  # (Dx,)
    my: np.ndarray  # (Dy,)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Translate rows of `X` and re-normalise to the unit sphere."""
        check_pairs(X)
        if X.shape[1] != self.W.shape[0]:
            raise ValueError(f"Expected source dim {self.W.shape[0]}, got {X.shape[1]}.")
        return _unit((X - self.mx) @ self.W + self.my)


def fit_procrustes(X: np.ndarray, Y: np.ndarray, center: bool = True) -> LinearMap:
    """Orthogonal Procrustes: W = U V^T from the SVD of Xc^T Yc; W has orthonormal rows when Dx <= Dy."""
    check_pairs(X, Y)
    mx, my = (X.mean(0), Y.mean(0)) if center else (np.zeros(X.shape[1]), np.zeros(Y.shape[1]))
    U, _, Vt = np.linalg.svd((X - mx).T @ (Y - my), full_matrices=False)
    return LinearMap(U @ Vt, mx, my)


def fit_ridge(X: np.ndarray, Y: np.ndarray, alpha: float = 1.0) -> LinearMap:
    """Affine least squares with an L2 penalty `alpha` (closed form on centred data)."""
    check_pairs(X, Y)
    if alpha < 0:
        raise ValueError(f"`alpha` must be >= 0, got {alpha}.")
    mx, my = X.mean(0), Y.mean(0)
    Xc = X - mx
    W = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (Y - my))
    return LinearMap(W, mx, my)


def chain(*maps: Translate) -> Translate:
    """Compose translators left to right: chain(f_AB, f_BC)(x) = f_BC(f_AB(x))."""
    if not maps:
        raise ValueError("`chain` needs at least one map.")

    def composed(X: np.ndarray) -> np.ndarray:
        for f in maps:
            X = f(X)
        return X

    return composed


# ----------------------------------------------------------------------------------------------
# Training loss shared by the MLP baseline and HMoE


def translation_loss(
    pred: torch.Tensor, target: torch.Tensor, infonce_weight: float, temp: float
) -> torch.Tensor:
    """1 - cos(pred, target) plus in-batch InfoNCE (each prediction must find its own target)."""
    p, t = F.normalize(pred, dim=1), F.normalize(target, dim=1)
    cos = 1 - (p * t).sum(1).mean()
    nce = F.cross_entropy(p @ t.T / temp, torch.arange(len(p)))
    return cos + infonce_weight * nce


def _fit_torch(module: nn.Module, X: np.ndarray, Y: np.ndarray, cfg: EmbTranslateConfig) -> None:
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    Xt, Yt = torch.from_numpy(X).float(), torch.from_numpy(Y).float()
    gen = torch.Generator().manual_seed(cfg.seed)
    for step in range(cfg.steps):
        idx = torch.randint(0, len(Xt), (min(cfg.batch_size, len(Xt)),), generator=gen)
        loss = translation_loss(module(Xt[idx]), Yt[idx], cfg.infonce_weight, cfg.infonce_temperature)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 200 == 0:
            logger.info("step %d loss %.4f", step, loss.item())


class MLPTranslator(nn.Module):
    """Global 2-layer MLP baseline with a linear skip (so it starts as a linear map)."""

    def __init__(self, dx: int, dy: int, hidden: int = 1024) -> None:
        super().__init__()
        self.skip = nn.Linear(dx, dy)
        self.mlp = nn.Sequential(nn.Linear(dx, hidden), nn.GELU(), nn.Linear(hidden, dy))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, Dx) -> (N, Dy), not normalised."""
        return self.skip(x) + self.mlp(x)


def fit_mlp(
    X: np.ndarray, Y: np.ndarray, cfg: EmbTranslateConfig, hidden: int = 1024
) -> tuple[Translate, int]:
    """Train the MLP baseline with the same loss and steps as HMoE; returns (translator, #parameters)."""
    check_pairs(X, Y)
    torch.manual_seed(cfg.seed)
    mlp = MLPTranslator(X.shape[1], Y.shape[1], hidden)
    _fit_torch(mlp, X, Y, cfg)
    mlp.eval()

    def translate(Z: np.ndarray) -> np.ndarray:
        check_pairs(Z)
        with torch.no_grad():
            return _unit(mlp(torch.from_numpy(Z).float()).numpy())

    return translate, sum(p.numel() for p in mlp.parameters())


# ----------------------------------------------------------------------------------------------
# Hierarchical mixture of low-rank residual experts


def spherical_kmeans(X: np.ndarray, k: int, seed: int, iters: int = 30) -> np.ndarray:
    """Unit-norm centroids (k, D) of unit-norm rows of X (cosine k-means, k-means++-style seeding)."""
    rng = np.random.default_rng(seed)
    C = [X[rng.integers(len(X))]]
    for _ in range(1, k):
        d = 1 - np.max(X @ np.array(C).T, axis=1)
        C.append(X[rng.choice(len(X), p=d.clip(1e-12) / d.clip(1e-12).sum())])
    C = np.array(C)
    for _ in range(iters):
        assign = np.argmax(X @ C.T, axis=1)
        for j in range(k):
            if (assign == j).any():
                C[j] = X[assign == j].sum(0)
        C = _unit(C)
    return C


class HMoETranslator(nn.Module):
    """y = base(x) + sum_r g_r(x) sum_e pi_re(x) B_re A_re x~ with a null (base-only) region slot.

    Level 1 routes by cosine to fixed k-means centroids (top-`top_regions`, softmax with a fixed null
    logit, so inputs far from every region fall back to the base map); level 2 is a learned softmax
    over the region's experts. x~ is the centred, re-normalised source vector.

    Example:
        >>> X, Y = np.random.randn(64, 6), np.random.randn(64, 5)
        >>> m = HMoETranslator.fit(X / np.linalg.norm(X, axis=1, keepdims=True), Y,
        ...                        EmbTranslateConfig(num_regions=2, top_regions=1, steps=2))
        >>> m.translate(X[:3]).shape
        (3, 5)
    """

    def __init__(
        self, base: LinearMap, centroids: np.ndarray, null_logit: float, cfg: EmbTranslateConfig
    ) -> None:
        super().__init__()
        self.cfg = cfg
        dx, dy = base.W.shape
        R, E, r = cfg.num_regions, cfg.experts_per_region, cfg.rank
        self.register_buffer("W0", torch.from_numpy(base.W).float())
        self.register_buffer("mx", torch.from_numpy(base.mx).float())
        self.register_buffer("my", torch.from_numpy(base.my).float())
        self.register_buffer("centroids", torch.from_numpy(centroids).float())  # (R, Dx)
        self.null_logit = null_logit
        self.router = nn.Parameter(torch.zeros(R, E, dx))  # level-2 routers, start uniform
        self.A = nn.Parameter(torch.randn(R * E, r, dx) / dx**0.5)
        self.B = nn.Parameter(torch.zeros(R * E, dy, r))  # zero: HMoE starts exactly at the base map

    def _tilde(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x - self.mx, dim=1)

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """Expert weights (N, R*E); the missing mass (1 - row sum) is the base-map fallback."""
        xt = self._tilde(x)
        sim = xt @ self.centroids.T  # (N, R)
        keep = sim.topk(self.cfg.top_regions, dim=1).indices
        logits = torch.full_like(sim, float("-inf")).scatter(1, keep, sim.gather(1, keep))
        null = torch.full((len(x), 1), self.null_logit, dtype=sim.dtype)
        g = torch.softmax(torch.cat([logits, null], 1) / self.cfg.region_temperature, dim=1)[:, :-1]  # (N, R)
        pi = torch.softmax(torch.einsum("red,nd->nre", self.router, xt), dim=2)  # (N, R, E)
        return (g[:, :, None] * pi).flatten(1)  # (N, R*E)

    def residuals(self, x: torch.Tensor) -> torch.Tensor:
        """Every expert's residual (N, R*E, Dy)."""
        h = torch.einsum("krd,nd->nkr", self.A, self._tilde(x))
        return torch.einsum("kyr,nkr->nky", self.B, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, Dx) -> (N, Dy) unnormalised translation."""
        base = (x - self.mx) @ self.W0 + self.my
        return base + torch.einsum("nk,nky->ny", self.gates(x), self.residuals(x))

    @torch.no_grad()
    def translate(self, X: np.ndarray) -> np.ndarray:
        """Numpy in, unit-norm numpy out."""
        check_pairs(X)
        return _unit(self(torch.from_numpy(X).float()).numpy())

    @torch.no_grad()
    def disagreement(self, X: np.ndarray) -> np.ndarray:
        """Gate-weighted spread of the active experts' residuals (0 when only the base map acts)."""
        x = torch.from_numpy(X).float()
        g, res = self.gates(x), self.residuals(x)  # (N, K), (N, K, Dy)
        mass = g.sum(1, keepdim=True).clamp_min(1e-12)
        mean = torch.einsum("nk,nky->ny", g, res) / mass
        return (
            (torch.einsum("nk,nk->n", g, (res - mean[:, None]).pow(2).sum(2)) / mass.squeeze(1))
            .sqrt()
            .numpy()
        )

    def num_trainable(self) -> int:
        """Trainable parameter count (the frozen base map is not counted)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    @classmethod
    def fit(cls, X: np.ndarray, Y: np.ndarray, cfg: EmbTranslateConfig) -> HMoETranslator:
        """Fit the base map in closed form, cluster the anchors, then train routers and experts."""
        check_pairs(X, Y)
        if len(X) < cfg.num_regions:
            raise ValueError(f"Need at least `num_regions`={cfg.num_regions} anchors, got {len(X)}.")
        base = fit_ridge(X, Y, cfg.ridge_alpha) if cfg.base == "ridge" else fit_procrustes(X, Y)
        Xt = _unit(X - base.mx)
        C = spherical_kmeans(Xt, cfg.num_regions, cfg.seed)
        null = float(np.quantile((Xt @ C.T).max(1), cfg.fallback_quantile))
        torch.manual_seed(cfg.seed)
        model = cls(base, C, null, cfg)
        _fit_torch(model, X, Y, cfg)
        return model.eval()


# ----------------------------------------------------------------------------------------------
# Geometry-aware confidence


@dataclass
class GeometricConfidence:
    """Per-vector error bound and confidence for a fitted translator f (source -> target).

    For an input x and a calibration anchor a (held out from training), the triangle inequality gives
        ||f(x) - g(x)|| <= ||f(a) - g(a)|| + ||f(x) - f(a)|| + ||g(x) - g(a)||
                        <= e(a) + L(a) ||x - a||,
    where g is the unknown "true" target embedding of the same text, e(a) the measured anchor error and
    L(a) the local distortion (target plus map Lipschitz ratio over a's anchor neighbours). The bound
    B(x) averages this over the k nearest anchors (anchor density enters through ||x - a||) and adds
    the HMoE expert disagreement. confidence = exp(-B / s), s = median anchor bound (leave-one-out).
    """

    anchors: np.ndarray  # (M, Dx) calibration sources
    errors: np.ndarray  # (M,) e(a)
    distortion: np.ndarray  # (M,) L(a)
    lipschitz: float  # median map-only ratio: used when composing along a chain
    scale: float
    k: int
    disagreement_fn: Callable[[np.ndarray], np.ndarray] | None = None

    @classmethod
    def fit(
        cls,
        translate: Translate,
        X_cal: np.ndarray,
        Y_cal: np.ndarray,
        k: int = 5,
        disagreement_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> GeometricConfidence:
        """Measure anchor errors and local distortions on calibration pairs the translator never saw."""
        check_pairs(X_cal, Y_cal)
        if len(X_cal) <= k:
            raise ValueError(f"Need more than k={k} calibration anchors, got {len(X_cal)}.")
        F_cal = translate(X_cal)
        errors = np.linalg.norm(F_cal - Y_cal, axis=1)
        dx = np.linalg.norm(X_cal[:, None] - X_cal[None], axis=2) + np.eye(len(X_cal)) * 1e9
        nn_idx = np.argsort(dx, axis=1)[:, :k]  # (M, k)
        rows = np.arange(len(X_cal))[:, None]
        d = np.maximum(dx[rows, nn_idx], 1e-9)
        map_ratio = np.linalg.norm(F_cal[:, None] - F_cal[nn_idx], axis=2) / d
        tgt_ratio = np.linalg.norm(Y_cal[:, None] - Y_cal[nn_idx], axis=2) / d
        distortion = np.median(map_ratio + tgt_ratio, axis=1)
        conf = cls(X_cal, errors, distortion, float(np.median(map_ratio)), 1.0, k, disagreement_fn)
        loo = (errors[nn_idx] + distortion[nn_idx] * d).mean(1)  # each anchor bounded by its neighbours
        conf.scale = float(max(np.median(loo), 1e-9))
        return conf

    def bound(self, X: np.ndarray) -> np.ndarray:
        """Upper-bound estimate of ||f(x) - g(x)|| for each row of X."""
        check_pairs(X)
        d = np.linalg.norm(X[:, None] - self.anchors[None], axis=2)  # (N, M)
        idx = np.argsort(d, axis=1)[:, : self.k]
        rows = np.arange(len(X))[:, None]
        b = (self.errors[idx] + self.distortion[idx] * d[rows, idx]).mean(1)
        if self.disagreement_fn is not None:
            b = b + self.disagreement_fn(X)
        return b

    def confidence(self, X: np.ndarray) -> np.ndarray:
        """Score in (0, 1]: 1 near well-translated anchors, decaying with the bound."""
        return np.exp(-self.bound(X) / self.scale)


def chained_bound(
    X: np.ndarray, first: Translate, conf_first: GeometricConfidence, conf_second: GeometricConfidence
) -> np.ndarray:
    """Bound for A -> B -> C: B_AC(x) <= L_BC * B_AB(x) + B_BC(f_AB(x)) (errors propagate through f_BC)."""
    return conf_second.lipschitz * conf_first.bound(X) + conf_second.bound(first(X))


def nearest_anchor_similarity(X: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Baseline confidence: cosine similarity to the closest anchor (density only, no geometry)."""
    check_pairs(X)
    return (_unit(X) @ _unit(anchors).T).max(1)


def recall_at_k(
    queries: np.ndarray, docs: np.ndarray, gold: np.ndarray, ks: tuple[int, ...]
) -> dict[int, float]:
    """Recall@k of cosine retrieval where query i's relevant document is docs[gold[i]]."""
    check_pairs(queries)
    check_pairs(docs)
    if queries.shape[1] != docs.shape[1]:
        raise ValueError(
            f"Queries ({queries.shape[1]}-d) and documents ({docs.shape[1]}-d) must share a space."
        )
    ranks = gold_ranks(queries, docs, gold)
    return {k: float((ranks < k).mean()) for k in ks}


def gold_ranks(queries: np.ndarray, docs: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """0-based rank of each query's gold document (ties count against the gold)."""
    S = _unit(queries) @ _unit(docs).T
    g = S[np.arange(len(S)), gold]
    return (S > g[:, None]).sum(1) + (S == g[:, None]).sum(1) - 1
