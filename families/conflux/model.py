"""ConFlux-lite: variable seriation, 2-D (variable x time) patches, a ViT encoder, unpatch, un-permute.

Paper: "ConFlux: Multivariate Time Series in Flux, One Unified Forecast in Confluence", ICML 2026 (poster
61370). No arXiv text or code is public; only the abstract. Everything below the abstract's level is
our reconstruction (see README): the seriation criterion, patch geometry, RevIN, embeddings and head.

Shapes: B batch, N variables, L context steps, H horizon, V = ceil(N / p_v) variable patches,
P = L / p_t time patches, E hidden size.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

from .config import ConFluxConfig

logger = logging.getLogger(__name__)


def seriation_order(series: np.ndarray, method: str = "spectral") -> np.ndarray:
    """Permutation that puts strongly correlated variables next to each other. series (T, N) -> (N,).

    spectral: sort by the Fiedler vector of the |correlation| graph Laplacian; hclust: optimal leaf order
    of average-linkage clustering on 1 - |corr|; none: identity.
    """
    series = np.asarray(series, dtype=np.float64)
    if series.ndim != 2 or series.shape[0] < 3 or series.shape[1] < 1:
        raise ValueError(f"`series` must be (T >= 3, N >= 1), got {series.shape}.")
    if not np.isfinite(series).all():
        raise ValueError("`series` contains NaN or inf; impute before computing the variable order.")
    n = series.shape[1]
    if method == "none" or n < 3:
        return np.arange(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = np.nan_to_num(np.abs(np.corrcoef(series.T)))  # constant variables get similarity 0
    if method == "spectral":
        lap = np.diag(sim.sum(1)) - sim
        _, vecs = np.linalg.eigh(lap)
        return np.argsort(vecs[:, 1], kind="stable")
    if method == "hclust":
        from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
        from scipy.spatial.distance import squareform

        dist = squareform(np.clip(1 - sim, 0, None), checks=False)
        return leaves_list(optimal_leaf_ordering(linkage(dist, "average"), dist))
    raise ValueError(f"`method` must be 'spectral', 'hclust' or 'none', got {method!r}.")


def inverse_permutation(perm: np.ndarray | torch.Tensor) -> torch.Tensor:
    """inv with inv[perm[i]] = i, so x[..., perm][..., inv] == x."""
    perm = torch.as_tensor(np.asarray(perm), dtype=torch.long)
    if sorted(perm.tolist()) != list(range(len(perm))):
        raise ValueError("`perm` is not a permutation of 0..N-1.")
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(len(perm))
    return inv


def patchify(x: torch.Tensor, patch_vars: int, patch_len: int) -> torch.Tensor:
    """(B, N, L) -> (B, V, P, p_v * p_t); N is zero-padded up to a multiple of p_v."""
    b, n, length = x.shape
    if length % patch_len:
        raise ValueError(f"length {length} is not a multiple of `patch_len` {patch_len}.")
    pad = (-n) % patch_vars
    x = torch.cat([x, x.new_zeros(b, pad, length)], 1) if pad else x
    v, p = x.shape[1] // patch_vars, length // patch_len
    x = x.view(b, v, patch_vars, p, patch_len).permute(0, 1, 3, 2, 4)  # (B, V, P, p_v, p_t)
    return x.reshape(b, v, p, patch_vars * patch_len)


def unpatchify(tokens: torch.Tensor, num_variables: int, patch_vars: int, patch_len: int) -> torch.Tensor:
    """Inverse of `patchify`: (B, V, P, p_v * p_t) -> (B, N, L), dropping the padded variables."""
    b, v, p, _ = tokens.shape
    x = tokens.view(b, v, p, patch_vars, patch_len).permute(0, 1, 3, 2, 4)  # (B, V, p_v, P, p_t)
    return x.reshape(b, v * patch_vars, p * patch_len)[:, :num_variables]


class ConFlux(nn.Module):
    """Forecaster for any number of variables N <= max_variables: (B, N, L) -> (B, N, H).

    Example:
        >>> model = ConFlux(ConFluxConfig(context_length=16, horizon=4, patch_len=4))
        >>> model(torch.randn(2, 7, 16)).shape
        torch.Size([2, 7, 4])
    """

    def __init__(self, config: ConFluxConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embed = nn.Linear(c.patch_vars * c.patch_len, c.hidden_size)
        max_v = -(-c.max_variables // c.patch_vars)
        self.var_pos = nn.Parameter(0.02 * torch.randn(max_v, c.hidden_size))  # variable-slot embedding
        self.time_pos = nn.Parameter(0.02 * torch.randn(c.num_time_patches, c.hidden_size))
        layer = nn.TransformerEncoderLayer(
            c.hidden_size,
            c.num_attention_heads,
            4 * c.hidden_size,
            c.dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, c.num_hidden_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(c.hidden_size)
        # unpatch: one variable-patch row (P tokens) -> p_v variables x H steps
        self.head = nn.Linear(c.num_time_patches * c.hidden_size, c.patch_vars * c.horizon)
        self.register_buffer("perm", torch.empty(0, dtype=torch.long), persistent=False)

    def fit_order(self, series: np.ndarray) -> torch.Tensor:
        """Fit and store the variable order on training data (T, N); returns the permutation."""
        self.perm = torch.as_tensor(seriation_order(series, self.config.reorder), dtype=torch.long)
        return self.perm

    def num_tokens(self, num_variables: int) -> int:
        """ceil(N / p_v) * L / p_t attention tokens."""
        return -(-num_variables // self.config.patch_vars) * self.config.num_time_patches

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Forecast (B, N, H) in the caller's variable order; the stored order (if any) is applied inside."""
        c = self.config
        if x.dim() != 3 or x.shape[-1] != c.context_length:
            raise ValueError(f"expected (B, N, {c.context_length}) inputs, got {tuple(x.shape)}.")
        if x.shape[1] < 1 or x.shape[1] > c.max_variables:
            raise ValueError(f"number of variables must be in [1, {c.max_variables}], got {x.shape[1]}.")
        if not torch.isfinite(x).all():
            raise ValueError("inputs contain NaN or inf; impute them before forecasting.")
        n = x.shape[1]
        perm = self.perm if len(self.perm) == n else torch.arange(n, device=x.device)
        x = x[:, perm]  # seriation
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True) + 1e-5  # RevIN per variable
        tokens = self.embed(patchify((x - mean) / std, c.patch_vars, c.patch_len))  # (B, V, P, E)
        b, v, p, e = tokens.shape
        tokens = tokens + self.var_pos[:v, None] + self.time_pos[None, :p]
        h = self.norm(self.encoder(tokens.reshape(b, v * p, e)))  # one sequence of V*P tokens
        out = self.head(h.view(b, v, p * e)).view(b, v * c.patch_vars, c.horizon)[:, :n]  # unpatch
        out = out * std + mean
        return out[:, inverse_permutation(perm)]  # back to the caller's order
