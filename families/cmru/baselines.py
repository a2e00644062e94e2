"""minGRU baseline from the `minGRU-pytorch` package (the CMRU paper's own comparison unit).

The LRU baseline is our own code in model.py (an FFT scan): the `lru-pytorch` package's LRU loops in
Python over batch and time, too slow for L = 1000, so tests/families/test_cmru.py checks that ours gives
the same states as the package's on matched parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from .config import CMRUConfig


def _import_mingru() -> type[nn.Module]:
    try:
        from minGRU_pytorch import minGRU
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The minGRU baseline needs the `minGRU-pytorch` package: pip install minGRU-pytorch==0.2.1"
        ) from err
    return minGRU


class MinGRUUnit(nn.Module):
    """Wraps `minGRU_pytorch.minGRU` (log-space parallel scan) with the unit interface of model.py."""

    def __init__(self, config: CMRUConfig) -> None:
        super().__init__()
        mingru = _import_mingru()
        # expansion_factor = H / D gives H state units; the package projects back to D when H != D
        self.cell = mingru(config.hidden_size, expansion_factor=config.state_size / config.hidden_size)
        self.out_features = config.hidden_size

    def forward(self, u: torch.Tensor, mode: str = "scan", state_noise: float = 0.0) -> torch.Tensor:
        """(B, L, D) -> (B, L, D); the loop path feeds the package's one-step mode, with optional state noise."""
        if mode == "scan" and state_noise == 0:
            return self.cell(u)
        if mode not in ("scan", "loop"):
            raise ValueError(f"`mode` must be 'scan' or 'loop', got {mode!r}.")
        outs, hidden = [], None
        for t in range(u.shape[1]):
            if hidden is not None and state_noise > 0:
                hidden = hidden + state_noise * torch.randn_like(hidden)
            out, hidden = self.cell(u[:, t : t + 1], prev_hidden=hidden, return_next_prev_hidden=True)
            outs.append(out)
        return torch.cat(outs, dim=1)
