"""Realignment of last-layer hidden states back into the input-embedding space (LatentMAS).

A last-layer hidden state h lives in the output space (the rows of W_out predict tokens). Feeding it
back as an input embedding needs a map into the input space. LatentMAS solves the ridge problem
    W_a = argmin ||W_out W - W_in||^2 + lambda ||W||^2 = (W_out^T W_out + lambda I)^-1 W_out^T W_in,
so that h @ W_a is the input embedding of the token mixture that h predicts; the result is rescaled
to the mean norm of the input-embedding rows (the paper's norm matching).

Shapes: V = vocabulary, D = hidden size. W_in, W_out: (V, D); W_a: (D, D).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Aligner = Callable[[torch.Tensor], torch.Tensor]
"""A map from last-layer hidden states (..., D) to input embeddings (..., D)."""


def ridge_matrix(w_in: torch.Tensor, w_out: torch.Tensor, lam: float = 1e-5) -> torch.Tensor:
    """W_a = (W_out^T W_out + lam I)^-1 W_out^T W_in, in float64 for stability, returned as fp32 (D, D)."""
    if w_in.shape != w_out.shape:
        raise ValueError(
            f"input and output embeddings differ in shape {tuple(w_in.shape)} vs {tuple(w_out.shape)}: "
            "realignment needs one row per vocabulary entry in both."
        )
    if lam < 0:
        raise ValueError(f"`lam` must be >= 0, got {lam}.")
    a = w_out.double()
    gram = a.T @ a + lam * torch.eye(a.shape[1], dtype=torch.float64, device=a.device)  # (D, D)
    return torch.linalg.solve(gram, a.T @ w_in.double()).float()


@dataclass
class Realigner:
    """Callable aligner: `ridge` (W_a then norm rescale) or `identity` (norm rescale only).

    Example:
        >>> r = Realigner.from_embeddings(w_in, w_out, method="ridge")
        >>> e = r(h)  # (B, D) -> (B, D), norm = mean input-embedding row norm
    """

    matrix: torch.Tensor | None  # (D, D) or None for identity
    target_norm: float

    @classmethod
    def from_embeddings(
        cls, w_in: torch.Tensor, w_out: torch.Tensor, method: str = "ridge", lam: float = 1e-5
    ) -> Realigner:
        if method not in ("ridge", "identity"):
            raise ValueError(f"unknown realignment `{method}`: use 'ridge', 'identity' or pass a callable.")
        w_in32 = w_in.detach().float()
        target = float(w_in32.norm(dim=-1).mean())
        matrix = ridge_matrix(w_in32, w_out.detach().float(), lam) if method == "ridge" else None
        return cls(matrix=matrix, target_norm=target)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        x = hidden.float()
        if self.matrix is not None:
            x = x @ self.matrix.to(x.device)
        x = x * (self.target_norm / x.norm(dim=-1, keepdim=True).clamp_min(1e-6))
        return x.to(hidden.dtype)
