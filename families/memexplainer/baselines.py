"""Baseline event scores: gradient x input, captum integrated gradients, attention weights, random.

All of them run on the real TGN forward (TGNMemory + TransformerConv), not on the explainer's replay.
Each returns a (B, T) score per event; `topk_events` turns scores into a k-subset.
"""

from __future__ import annotations

import numpy as np
import torch

from .data import EventStreams
from .model import MemTGN


def grad_x_input(model: MemTGN, streams: EventStreams) -> torch.Tensor:
    """sum_f x_ef * d logit / d x_ef per event (raw features; time encodings are not inputs here)."""
    msg = streams.msg.to(model.lin1.weight.dtype).clone().requires_grad_(True)
    logit = model.run(streams, msg=msg).logit
    (grad,) = torch.autograd.grad(logit.sum(), msg)  # streams are independent: sum = per-stream grads
    return (grad * msg).sum(-1).detach()


def integrated_gradients(model: MemTGN, streams: EventStreams, n_steps: int = 32) -> torch.Tensor:
    """captum IntegratedGradients on the raw event features (baseline: all-zero features), per event."""
    from captum.attr import IntegratedGradients

    if n_steps < 2:
        raise ValueError(f"`n_steps` must be >= 2, got {n_steps}.")
    dtype = model.lin1.weight.dtype

    def forward(msg: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        # captum stacks the n_steps interpolated copies along dim 0 and repeats src/dst to match
        batch = EventStreams(src, dst, msg, torch.zeros(len(src)), torch.zeros(len(src)), streams.num_nodes)
        return model.run(batch, msg=msg).logit

    msg = streams.msg.to(dtype)
    attr = IntegratedGradients(forward).attribute(
        msg,
        baselines=torch.zeros_like(msg),
        additional_forward_args=(streams.src, streams.dst),
        n_steps=n_steps,
    )
    return attr.sum(-1).detach()


@torch.no_grad()
def attention_scores(model: MemTGN, streams: EventStreams) -> torch.Tensor:
    """Head-averaged attention weight of each event in the query node's window; 0 for all others."""
    out = model.run(streams)
    scores = torch.zeros(streams.src.shape, dtype=out.alpha.dtype)
    scores[out.window_stream, out.data.step[out.e_id]] = out.alpha.mean(-1)
    return scores


def random_scores(streams: EventStreams, rng: np.random.Generator) -> torch.Tensor:
    """Uniform random scores (the chance level)."""
    return torch.from_numpy(rng.random(streams.src.shape))


def topk_events(
    scores: np.ndarray, k: int, rng: np.random.Generator, logit: float | None = None
) -> np.ndarray:
    """Indices of the k highest scores (times sign(logit) when a signed score is given), random ties."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or not 1 <= k <= s.size:
        raise ValueError(f"`scores` must be 1-D with at least k={k} entries, got shape {s.shape}.")
    if logit is not None and logit < 0:
        s = -s
    return np.sort(np.lexsort((rng.random(s.size), -s))[:k])
