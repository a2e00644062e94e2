"""Realignment of last-layer hidden states back into the input-embedding space (LatentMAS).

A last-layer hidden state h lives in the output space (the rows of W_out predict tokens). Feeding it
back as an input embedding needs a map into the input space. LatentMAS solves the ridge problem
    W_a = argmin ||W_out W - W_in||^2 + lambda ||W||^2 = (W_out^T W_out + lambda I)^-1 W_out^T W_in,
so that h @ W_a is the input embedding of the token mixture that h predicts; the result is rescaled
to the mean norm of the input embeddings (the paper's norm matching).

W_in is what the model's own input-embedding module returns for each token id, not its weight rows:
Gemma 3 multiplies token embeddings by sqrt(D) inside that module, so its raw rows are ~25x too small
to stand in for a real token (`Realigner.from_model`).

Shapes: V = vocabulary, D = hidden size. W_in, W_out: (V, D); W_a: (D, D).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

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

    @classmethod
    def from_model(
        cls,
        input_embeddings: nn.Module,
        w_out: torch.Tensor,
        method: str = "ridge",
        lam: float = 1e-5,
        chunk: int = 8192,
    ) -> Realigner:
        """The aligner of a model: W_in rows and the target norm come from running `input_embeddings`
        (the model's embedding module, scaling included) on every token id, in chunks of `chunk` ids,
        so a 262k vocabulary never needs a float64 copy of the whole table."""
        if method not in ("ridge", "identity"):
            raise ValueError(f"unknown realignment `{method}`: use 'ridge', 'identity' or pass a callable.")
        w_out = w_out.detach()
        vocab, d = w_out.shape
        device = w_out.device
        gram = torch.zeros((d, d), dtype=torch.float64, device=device)
        cross = torch.zeros((d, d), dtype=torch.float64, device=device)
        norm_sum = 0.0
        with torch.no_grad():
            for start in range(0, vocab, chunk):
                ids = torch.arange(start, min(start + chunk, vocab), device=device)
                rows_in = input_embeddings(ids[None])[0].double()  # (n, D) as the model feeds them
                rows_out = w_out[start : start + chunk].double()
                norm_sum += float(rows_in.norm(dim=-1).sum())
                if method == "ridge":
                    gram += rows_out.T @ rows_out
                    cross += rows_out.T @ rows_in
        if lam < 0:
            raise ValueError(f"`lam` must be >= 0, got {lam}.")
        matrix = None
        if method == "ridge":
            eye = torch.eye(d, dtype=torch.float64, device=device)
            matrix = torch.linalg.solve(gram + lam * eye, cross).float()
        return cls(matrix=matrix, target_norm=norm_sum / vocab)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        x = hidden.float()
        if self.matrix is not None:
            x = x @ self.matrix.to(x.device)
        x = x * (self.target_norm / x.norm(dim=-1, keepdim=True).clamp_min(1e-6))
        return x.to(hidden.dtype)
