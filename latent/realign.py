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
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

Aligner = Callable[[torch.Tensor], torch.Tensor]
"""A map from last-layer hidden states (..., D) to input embeddings (..., D)."""


class HasEmbeddings(Protocol):
    """What `TrainableAligner.from_model` reads of a `LatentModel` (named structurally: the model module
    imports this one, so this one does not import it back)."""

    model: nn.Module
    hidden_size: int
    device: torch.device


def ridge_matrix(w_in: torch.Tensor, w_out: torch.Tensor, lam: float = 1e-5) -> torch.Tensor:
    """W_a = (W_out^T W_out + lam I)^-1 W_out^T W_in, in float64 for stability, returned as fp32 (D, D)."""
    if w_in.shape != w_out.shape:
        raise ValueError(
            f"input and output embeddings differ in shape {tuple(w_in.shape)} vs {tuple(w_out.shape)}: "
            "realignment needs one row per vocabulary entry in both."
        )
    _check_lam(lam)
    a = w_out.double()
    return _solve_ridge(a.T @ a, a.T @ w_in.double(), lam)


def _check_lam(lam: float) -> None:
    if lam < 0:
        raise ValueError(f"`lam` must be >= 0, got {lam}.")


def _solve_ridge(gram: torch.Tensor, cross: torch.Tensor, lam: float) -> torch.Tensor:
    """The ridge solution from its sufficient statistics W_out^T W_out (D, D) and W_out^T W_in (D, D),
    both float64, so a whole table and one accumulated chunk by chunk give the same map."""
    eye = torch.eye(gram.shape[0], dtype=torch.float64, device=gram.device)
    return torch.linalg.solve(gram + lam * eye, cross).float()


REALIGN_METHODS = ("ridge", "identity", "soft")
"""Realignments by name: the paper's ridge map, its norm rescale alone, and soft tokens (not the paper's)."""


def _check_method(method: str) -> None:
    if method not in ("ridge", "identity"):
        raise ValueError(f"unknown realignment `{method}`: use 'ridge', 'identity' or pass a callable.")


@dataclass
class SoftTokenAligner:
    """Soft-token thoughts (`realign="soft"`; not the paper's realignment): the input embedding the thought's
    hidden state predicts, averaged over its next-token distribution, e = softmax(h W_out^T / T) W_in.

    The paper's map keeps the hidden state's direction, so a thought can sit far from every token (on the
    Qwen2.5-Coder models: nearest-token cosine 0.1-0.27 against 0.74 between real tokens, a few channels
    holding a quarter of its norm; `bench/studies/thought_geometry.py`). A soft token is a mixture of real
    token embeddings, inside the region the model was trained to read. The LM head runs on every step.
    """

    w_out: torch.Tensor  # (V, D): the LM head (a reference, not a copy)
    w_in: torch.Tensor  # (V, D): the input embedding of every token, as the model feeds them
    temperature: float = 1.0

    @classmethod
    def from_model(
        cls, input_embeddings: nn.Module, w_out: torch.Tensor, temperature: float = 1.0, chunk: int = 8192
    ) -> SoftTokenAligner:
        """Rows as the embedding module returns them (Gemma scales its rows by sqrt(D) inside it); the
        weight itself when the module returns its rows unchanged, so no copy is made then."""
        if temperature <= 0:
            raise ValueError(f"`temperature` must be > 0, got {temperature}.")
        weight = getattr(input_embeddings, "weight", None)
        vocab = w_out.shape[0]
        device = next(input_embeddings.parameters(), w_out).device
        with torch.no_grad():
            probe = torch.arange(min(chunk, vocab), device=device)
            if weight is not None and torch.equal(input_embeddings(probe[None])[0], weight[probe]):
                return cls(w_out.detach(), weight.detach()[:vocab], temperature)
            rows = [
                input_embeddings(torch.arange(i, min(i + chunk, vocab), device=device)[None])[0]
                for i in range(0, vocab, chunk)
            ]
        return cls(w_out.detach(), torch.cat(rows).to(w_out.device), temperature)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = hidden.to(self.w_out.dtype) @ self.w_out.T
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        return (probs.to(self.w_in.dtype) @ self.w_in).to(hidden.dtype)


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
        _check_method(method)
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
        _check_method(method)
        _check_lam(lam)
        w_out = w_out.detach()
        vocab, d = w_out.shape
        device = w_out.device
        gram = torch.zeros((d, d), dtype=torch.float64, device=device)
        cross = torch.zeros((d, d), dtype=torch.float64, device=device)
        norm_sum = 0.0
        # the embedding may sit on another device than the head (a model spread with `device_map`)
        ids_device = next(input_embeddings.parameters(), w_out).device
        with torch.no_grad():
            for start in range(0, vocab, chunk):
                ids = torch.arange(start, min(start + chunk, vocab), device=ids_device)
                rows_in = input_embeddings(ids[None])[0].to(device).double()  # (n, D) as the model feeds them
                rows_out = w_out[start : start + chunk].double()
                norm_sum += float(rows_in.norm(dim=-1).sum())
                if method == "ridge":
                    gram += rows_out.T @ rows_out
                    cross += rows_out.T @ rows_in
        matrix = _solve_ridge(gram, cross, lam) if method == "ridge" else None
        return cls(matrix=matrix, target_norm=norm_sum / vocab)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        x = hidden.float()
        if self.matrix is not None:
            if self.matrix.device != x.device:  # moved once, not every step (a model over several devices)
                self.matrix = self.matrix.to(x.device)
            x = x @ self.matrix
        x = x * (self.target_norm / x.norm(dim=-1, keepdim=True).clamp_min(1e-6))
        return x.to(hidden.dtype)


ALIGNER_KINDS = ("linear", "mlp")


class TrainableAligner(nn.Module):
    """A realignment map that can be trained: `linear` (W h + b) or `mlp` (the linear map plus a residual
    MLP), initialised at the ridge map so that, before training, it returns what `Realigner` returns.
    The output is rescaled to `target_norm * exp(log_scale)` (norm matching with a trainable scale).

    Save with `save(path)` (safetensors) and plug it in with `load_model(..., realign=path)` or
    `load_model(..., realign=aligner)`.

    Example:
        >>> al = TrainableAligner.from_model(m)            # ridge init, linear
        >>> al.save("aligner.safetensors")
        >>> m2 = load_model("smollm2-135m-instruct", realign="aligner.safetensors")
    """

    def __init__(
        self,
        hidden_size: int,
        kind: str = "linear",
        mlp_hidden: int = 0,
        target_norm: float = 1.0,
        matrix: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if kind not in ALIGNER_KINDS:
            raise ValueError(f"unknown aligner kind {kind!r}: use one of {ALIGNER_KINDS}.")
        if hidden_size < 1:
            raise ValueError(f"`hidden_size` must be >= 1, got {hidden_size}.")
        if kind == "mlp" and mlp_hidden < 1:
            raise ValueError(f"an `mlp` aligner needs `mlp_hidden` >= 1, got {mlp_hidden}.")
        self.kind = kind
        self.hidden_size = hidden_size
        self.mlp_hidden = mlp_hidden if kind == "mlp" else 0
        self.linear = nn.Linear(hidden_size, hidden_size)
        with torch.no_grad():
            w = torch.eye(hidden_size) if matrix is None else matrix.detach().float()
            if w.shape != (hidden_size, hidden_size):
                raise ValueError(
                    f"ridge matrix has shape {tuple(w.shape)}, expected ({hidden_size}, {hidden_size})."
                )
            self.linear.weight.copy_(w.T)  # x @ W_a == linear(x)
            self.linear.bias.zero_()
        self.mlp: nn.Module | None = None
        if kind == "mlp":
            self.mlp = nn.Sequential(
                nn.Linear(hidden_size, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, hidden_size)
            )
            nn.init.zeros_(self.mlp[2].weight)  # the residual branch starts at 0: exact ridge at init
            nn.init.zeros_(self.mlp[2].bias)
        self.log_scale = nn.Parameter(torch.zeros(()))
        self.register_buffer("target_norm", torch.tensor(float(target_norm)))

    @classmethod
    def from_realigner(
        cls, realigner: Realigner, hidden_size: int, kind: str = "linear", mlp_hidden: int = 0
    ):
        """Start from a fixed `Realigner` (ridge or identity)."""
        return cls(hidden_size, kind, mlp_hidden, realigner.target_norm, realigner.matrix)

    @classmethod
    def from_model(cls, model: HasEmbeddings, kind: str = "linear", mlp_hidden: int = 0, lam: float = 1e-5):
        """The ridge map of a `LatentModel`, as a trainable module on the model's device."""
        hf = model.model
        ridge = Realigner.from_model(hf.get_input_embeddings(), hf.get_output_embeddings().weight, lam=lam)
        return cls.from_realigner(ridge, model.hidden_size, kind, mlp_hidden).to(model.device)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        x = hidden.to(self.linear.weight.dtype)
        y = self.linear(x)
        if self.mlp is not None:
            y = y + self.mlp(y)
        norm = self.target_norm.to(y.dtype) * self.log_scale.exp()
        y = y * (norm / y.norm(dim=-1, keepdim=True).clamp_min(1e-6))
        return y.to(hidden.dtype)

    def save(self, path: str | Path) -> None:
        """Write the weights and the settings that rebuild the module to one safetensors file."""
        from safetensors.torch import save_file

        tensors = {k: v.detach().float().cpu().contiguous() for k, v in self.state_dict().items()}
        meta = {"format": "latentworks-aligner-v1", "kind": self.kind, "hidden_size": str(self.hidden_size)}
        meta["mlp_hidden"] = str(self.mlp_hidden)
        save_file(tensors, str(path), metadata=meta)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> TrainableAligner:
        """Rebuild an aligner written by `save`."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"no aligner file at {str(path)!r}: pass 'ridge', 'identity', a callable, or the path of a "
                "file written by TrainableAligner.save."
            )
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("format") != "latentworks-aligner-v1":
                raise ValueError(
                    f"{str(path)!r} is not a latentworks aligner file (metadata format "
                    f"{meta.get('format')!r}); write one with TrainableAligner.save."
                )
            state = {k: f.get_tensor(k) for k in f.keys()}
        al = cls(int(meta["hidden_size"]), meta["kind"], int(meta.get("mlp_hidden", 0)))
        al.load_state_dict(state)
        return al.to(device)


class RandomThoughts:
    """Stand-in aligner for ablations: each thought is a random direction with the norm the real aligner
    would give it, so what the thoughts carry is removed and their scale kept."""

    def __init__(self, aligner: Aligner, seed: int) -> None:
        self.aligner = aligner
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        real = self.aligner(hidden)
        noise = torch.randn(real.shape, generator=self.gen).to(device=real.device, dtype=real.dtype)
        return noise * (real.norm(dim=-1, keepdim=True) / noise.norm(dim=-1, keepdim=True))
