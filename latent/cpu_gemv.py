"""Single-row bfloat16 matmuls on a CPU through `torch.mv`.

A latent step (and a batch-1 decode step) multiplies one row by every weight matrix. For a bfloat16
row on a CPU, `F.linear` goes through a oneDNN matmul that runs at about the speed of float32 there
(SmolLM2-135M's 210 decoder-layer matrices: 27.8 ms in bf16 against 29.0 ms in fp32, one thread), so
bf16 buys little at batch 1; `torch.mv` takes 20.7 ms and gives the same numbers (a batch-1 latent
loop's thoughts are bitwise equal; `bench/single_row_gemv.py`). `route_single_rows` points each
`nn.Linear` of a model at that path for exactly those inputs; anything else (more rows, float32,
autograd, another device) runs `F.linear` as before.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["route_single_rows", "single_row_linear", "unroute_single_rows"]


def single_row_linear(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`nn.Linear.forward`, with a single bf16 CPU row computed by `torch.mv`."""
    w = self.weight
    if (
        x.dtype == torch.bfloat16
        and w.dtype == torch.bfloat16
        and x.device.type == "cpu"
        and w.device.type == "cpu"
        and x.numel() == self.in_features
        and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))
    ):
        y = torch.mv(w, x.reshape(-1))
        if self.bias is not None:
            y = y + self.bias
        return y.view(*x.shape[:-1], self.out_features)
    return F.linear(x, w, self.bias)


def route_single_rows(model: nn.Module) -> int:
    """Give every plain `nn.Linear` of `model` the single-row path; returns how many were routed.
    Subclasses (quantized or adapter layers) keep their own forward; an adapter's base layer is routed."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear and "forward" not in module.__dict__:
            module.forward = types.MethodType(single_row_linear, module)
            n += 1
    return n


def unroute_single_rows(model: nn.Module) -> int:
    """Undo `route_single_rows`: every routed `nn.Linear` runs `F.linear` again; returns how many."""
    n = 0
    for module in model.modules():
        if getattr(module.__dict__.get("forward"), "__func__", None) is single_row_linear:
            del module.forward
            n += 1
    return n
