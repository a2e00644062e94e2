"""Few-row bfloat16 matmuls on a CPU, with the weight as the left operand.

A latent step or a decode step multiplies a few rows (one per batch row) by every weight matrix. For
bfloat16 rows on a CPU, `F.linear(x, W)` goes through a oneDNN matmul that runs at about the speed of
float32 there; the same product taken as `W @ x^T` is faster and gives the same numbers for up to
`FEW_ROWS` rows (bitwise equal on SmolLM2's and Gemma-3's shapes on an AMX Xeon; the tests check
closeness, since another CPU's kernels may round differently), and a single row is fastest as
`torch.mv`. SmolLM2-135M's 210 decoder-layer matrices, one thread: 27.6 ms through `F.linear` against
22.0 ms routed for one row, 32.6 against 25.5 ms for 16 rows, the transposing copy included
(`bench/speed/few_row_matmul.py`). `route_few_rows` points each `nn.Linear` of a model at that path for exactly
those inputs; anything else (more rows, float32, autograd, another device) runs `F.linear` as before.

The gain is the AMX Xeon's: on an AMD EPYC with `avx512_bf16` and no AMX the routed path is slower than
`F.linear` (Qwen2.5-Coder-0.5B at batch 1: 0.6x) and its one-row product is not bitwise equal to it. So a
model is routed only where `few_rows_pay()` holds, a CPU-feature rule: the CPU lists `amx_bf16`. Float32
never takes the route, so its numbers do not depend on the rule.
"""

from __future__ import annotations

import types
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FEW_ROWS", "cpu_flags", "few_row_linear", "few_rows_pay", "route_few_rows", "unroute_few_rows"]

# above this many rows the two products round differently (and a prompt read is compute-bound anyway)
FEW_ROWS = 32


@lru_cache(maxsize=1)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (`flags : fpu ... amx_bf16`); empty where the file is
    missing (another OS), which makes `few_rows_pay` fall back to plain `F.linear`."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def few_rows_pay() -> bool:
    """Whether this CPU should route few bf16 rows (`route_few_rows`): only with AMX (`amx_bf16`), where
    `W @ x^T` beat the oneDNN matmul behind `F.linear`; without it `F.linear` was the faster of the two."""
    return "amx_bf16" in cpu_flags()


def few_row_linear(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`nn.Linear.forward`, with up to `FEW_ROWS` bf16 CPU rows computed as `W @ x^T` (one: `torch.mv`).
    The result is made contiguous: later reductions (norms) over a transposed layout round differently."""
    w = self.weight
    rows = x.numel() // self.in_features
    if (
        0 < rows <= FEW_ROWS
        and x.dtype == torch.bfloat16
        and w.dtype == torch.bfloat16
        and x.is_cpu
        and w.is_cpu
        and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))
    ):
        flat = x.reshape(rows, self.in_features)
        y = torch.mv(w, flat[0]) if rows == 1 else (w @ flat.T).T.contiguous()
        if self.bias is not None:
            y = y + self.bias
        return y.view(*x.shape[:-1], self.out_features)
    return F.linear(x, w, self.bias)


def route_few_rows(model: nn.Module) -> int:
    """Give every plain `nn.Linear` of `model` the few-row path; returns how many were routed.
    Subclasses (quantized or adapter layers) keep their own forward; an adapter's base layer is routed."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear and "forward" not in module.__dict__:
            module.forward = types.MethodType(few_row_linear, module)
            n += 1
    return n


def unroute_few_rows(model: nn.Module) -> int:
    """Undo `route_few_rows`: every routed `nn.Linear` runs `F.linear` again; returns how many."""
    n = 0
    for module in model.modules():
        if getattr(module.__dict__.get("forward"), "__func__", None) is few_row_linear:
            del module.forward
            n += 1
    return n
