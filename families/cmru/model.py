"""Memory recurrent units with quantized, persistent states: BMRU, CMRU and alpha-CMRU, plus an LRU.

Papers: CMRU / alpha-CMRU, Brandoit, Fyon, Ernst, Drion, "Improving the Performance and Learning
Stability of Parallelizable RNNs Designed for Ultra-Low Power Applications", arXiv 2605.11855 (ICML 2026);
BMRU, De Geeter, Lambrechts, Ernst, Drion, "Parallelizable memory recurrent units", arXiv 2601.09495;
LRU, Orvieto et al., "Resurrecting Recurrent Neural Networks for Long Sequences", arXiv 2303.06349.
No public CMRU code exists; the update equations below are our reconstruction from the abstracts (see
README "Choices where the paper is silent").

Shapes: B batch, L sequence length, D residual width, H recurrent state units, C classes.

The three memory units share one latch with input-only gates (so a parallel scan applies):
    c_t = W u_t + b                 candidate drive                       (B, L, H)
    z_t = Heaviside(|c_t| - theta)  write switch, theta = softplus(.) > 0 (hysteresis threshold)
    s_t = sign(c_t)                 stable level written on a switch, in {-1, +1}
    BMRU:   h_t = (1 - z_t) h_{t-1} + z_t s_t           dh_t/dh_{t-1} = 1 - z_t = 0 at every write
    CMRU:   h_t = h_{t-1} + Delta_t,  Delta_t = z_t (s_t - sg[h_{t-1}])
            same forward values as BMRU (states stay in {-1, 0, +1}, 0 = the initial "unset" level),
            but dh_t/dh_{t-1} = I: a skip connection through time, so credit reaches every step.
    alpha-CMRU: the cumulative update with relaxed gates z = sigmoid(k(|c| - theta)), s = tanh(k c)
            (continuous states in [-1, 1]); `harden()` turns it into a CMRU for deployment.
Heaviside and sign get sigmoid/tanh surrogate derivatives (straight-through style).
"""

from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import CMRUConfig

logger = logging.getLogger(__name__)

QUANTIZED_LEVELS = (-1.0, 0.0, 1.0)  # stable states {-1, +1} plus the initial level 0


def linear_scan(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """Solve h_t = a_t * h_{t-1} + b_t for all t with a Hillis-Steele parallel scan along dim 1.

    Works for zeros in `a` (BMRU writes), complex tensors (LRU) and is differentiable; O(L log L)
    work but only log2(L) sequential tensor ops, which is why the units train fast on CPU.
    """
    if a.shape != b.shape or a.dim() < 2:
        raise ValueError(
            f"`a` and `b` must share a shape (B, L, ...), got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    if h0 is not None:
        b = torch.cat([b[:, :1] + a[:, :1] * h0.unsqueeze(1), b[:, 1:]], dim=1)
    length = a.shape[1]
    shift = 1
    while shift < length:
        # compose element t with element t - shift: (A, B) o (A', B') = (A A', A B' + B)
        a_prev = torch.cat([torch.ones_like(a[:, :shift]), a[:, :-shift]], dim=1)
        b_prev = torch.cat([torch.zeros_like(b[:, :shift]), b[:, :-shift]], dim=1)
        b = a * b_prev + b
        a = a * a_prev
        shift *= 2
    return b


def _heaviside_st(x: torch.Tensor, slope: float) -> torch.Tensor:
    """Heaviside forward, sigmoid(slope * x) derivative backward."""
    soft = torch.sigmoid(slope * x)
    return (x > 0).to(x.dtype) + (soft - soft.detach())  # bracketed: keeps the forward value exact


def _sign_st(x: torch.Tensor, slope: float) -> torch.Tensor:
    """Sign forward (+1 at 0 so the written level is always a stable one), tanh(slope * x) backward."""
    soft = torch.tanh(slope * x)
    return torch.where(x >= 0, 1.0, -1.0).to(x.dtype) + (soft - soft.detach())


def latch_values(z: torch.Tensor, s: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """Hard-latch states without a scan: h_t = s at the last write <= t, else h0. O(L), no gradient.

    Equal to `linear_scan(1 - z, z * s, h0)` for z in {0, 1}; a cumulative max finds the last write.
    """
    steps = torch.arange(z.shape[1], device=z.device).view(1, -1, 1).expand_as(z)  # (B, L, H)
    last = torch.where(z > 0.5, steps, -1).cummax(dim=1).values  # index of the last write, -1 if none
    held = torch.gather(s, 1, last.clamp(min=0))
    return torch.where(last >= 0, held, h0.unsqueeze(1).expand_as(held))


def snap_to_levels(h: torch.Tensor) -> torch.Tensor:
    """Nearest quantized level: what a bistable analog cell settles to between input steps."""
    return torch.round(h).clamp(-1.0, 1.0)


class MemoryUnit(nn.Module):
    """BMRU / CMRU / alpha-CMRU layer: (B, L, D) inputs -> (B, L, H) latch states."""

    def __init__(self, config: CMRUConfig) -> None:
        super().__init__()
        if config.unit not in ("bmru", "cmru", "acmru"):
            raise ValueError(f"MemoryUnit needs unit in ('bmru', 'cmru', 'acmru'), got {config.unit!r}.")
        self.kind = config.unit
        self.relaxed = config.unit == "acmru"  # alpha-CMRU until `harden()` is called
        self.slope = config.surrogate_slope
        self.relax_slope = config.relax_slope
        self.proj = nn.Linear(config.hidden_size, config.state_size)
        # softplus^{-1}(threshold_init) so theta starts at the configured value
        raw = math.log(math.expm1(config.threshold_init))
        self.theta_raw = nn.Parameter(torch.full((config.state_size,), raw))
        self.out_features = config.state_size

    @property
    def theta(self) -> torch.Tensor:
        """Hysteresis threshold, > 0 for any parameter value."""
        return F.softplus(self.theta_raw)

    @property
    def cumulative(self) -> bool:
        return self.kind in ("cmru", "acmru")

    @property
    def quantized(self) -> bool:
        return not self.relaxed

    def harden(self) -> None:
        """Switch an alpha-CMRU to hard (quantized) gates: the deployed CMRU."""
        self.relaxed = False

    def gates(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write switch z and written level s, both (B, L, H)."""
        c = self.proj(u)  # (B, L, H)
        if self.relaxed:
            z = torch.sigmoid(self.relax_slope * (c.abs() - self.theta))
            s = torch.tanh(self.relax_slope * c)
        else:
            z = _heaviside_st(c.abs() - self.theta, self.slope)
            s = _sign_st(c, self.slope)
        return z, s

    def forward(self, u: torch.Tensor, mode: str = "scan", state_noise: float = 0.0) -> torch.Tensor:
        """States (B, L, H); `mode='loop'` is the step-by-step reference, needed for noise injection."""
        z, s = self.gates(u)
        h0 = u.new_zeros(u.shape[0], z.shape[-1])
        if mode == "loop" or state_noise > 0:
            return self._loop(z, s, h0, state_noise)
        if mode != "scan":
            raise ValueError(f"`mode` must be 'scan' or 'loop', got {mode!r}.")
        if not self.cumulative:
            return linear_scan(1.0 - z, z * s, h0)  # BMRU: gradient through time is blocked at writes
        with torch.no_grad():  # forward values only; the cumulative sum below carries the gradient
            h_fwd = latch_values(z, s, h0) if self.quantized else linear_scan(1.0 - z, z * s, h0)
        h_prev = torch.cat([h0.unsqueeze(1), h_fwd[:, :-1]], dim=1)  # (B, L, H), stop-gradient
        delta = z * (s - h_prev)  # increments in {-2, -1, 0, 1, 2} for the hard units
        return h0.unsqueeze(1) + torch.cumsum(delta, dim=1)

    def _loop(self, z: torch.Tensor, s: torch.Tensor, h0: torch.Tensor, state_noise: float) -> torch.Tensor:
        h, states = h0, []
        for t in range(z.shape[1]):
            if state_noise > 0:
                h = h + state_noise * torch.randn_like(h)
                if self.quantized:
                    h = snap_to_levels(h)  # the bistable cell relaxes back to its nearest stable state
            if self.cumulative:
                h = h + z[:, t] * (s[:, t] - h.detach())
            else:
                h = (1.0 - z[:, t]) * h + z[:, t] * s[:, t]
            states.append(h)
        return torch.stack(states, dim=1)


class LRUUnit(nn.Module):
    """Linear Recurrent Unit: h_t = lambda * h_{t-1} + gamma * (B u_t), complex diagonal lambda, |lambda| < 1."""

    def __init__(self, config: CMRUConfig) -> None:
        super().__init__()
        h, d = config.state_size, config.hidden_size
        radius = torch.sqrt(torch.empty(h).uniform_(config.lru_r_min**2, config.lru_r_max**2))
        self.nu_log = nn.Parameter(torch.log(-torch.log(radius)))
        self.theta_log = nn.Parameter(torch.log(torch.empty(h).uniform_(1e-3, math.pi / 10)))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1.0 - radius**2)))  # input normalisation
        self.b_re = nn.Parameter(torch.randn(h, d) / math.sqrt(2 * d))
        self.b_im = nn.Parameter(torch.randn(h, d) / math.sqrt(2 * d))
        self.out_features = 2 * h  # real and imaginary parts; the block's readout plays the role of C

    def forward(self, u: torch.Tensor, mode: str = "scan", state_noise: float = 0.0) -> torch.Tensor:
        lam = torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))  # (H,)
        bu = torch.complex(u @ self.b_re.T, u @ self.b_im.T) * torch.exp(self.gamma_log)  # (B, L, H)
        if mode == "loop" or state_noise > 0:
            h, states = bu.new_zeros(bu.shape[0], bu.shape[-1]), []
            for t in range(bu.shape[1]):
                if state_noise > 0:
                    h = h + state_noise * torch.complex(torch.randn_like(h.real), torch.randn_like(h.real))
                h = lam * h + bu[:, t]
                states.append(h)
            hs = torch.stack(states, dim=1)
        elif mode == "scan":
            # lambda is time-invariant, so the scan is a causal convolution with lambda^k: one FFT pair
            n = 2 * bu.shape[1]
            powers = torch.exp(
                torch.arange(bu.shape[1], device=u.device).unsqueeze(-1) * torch.log(lam)
            )  # (L, H)
            spec = torch.fft.fft(bu, n=n, dim=1) * torch.fft.fft(powers, n=n, dim=0).unsqueeze(0)
            hs = torch.fft.ifft(spec, dim=1)[:, : bu.shape[1]]
        else:
            raise ValueError(f"`mode` must be 'scan' or 'loop', got {mode!r}.")
        return torch.cat([hs.real, hs.imag], dim=-1)


def build_unit(config: CMRUConfig) -> nn.Module:
    """Recurrent unit named by `config.unit`; minGRU comes from the `minGRU-pytorch` package."""
    if config.unit in ("bmru", "cmru", "acmru"):
        return MemoryUnit(config)
    if config.unit == "lru":
        return LRUUnit(config)
    from .baselines import MinGRUUnit  # lazy: keeps `import families.cmru` free of optional packages

    return MinGRUUnit(config)


class Block(nn.Module):
    """Pre-norm residual block: x + GLU(W [unit(LN(x))])."""

    def __init__(self, config: CMRUConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(config.hidden_size)
        self.unit = build_unit(config)
        self.out = nn.Linear(self.unit.out_features, 2 * config.hidden_size)

    def forward(self, x: torch.Tensor, mode: str = "scan", state_noise: float = 0.0) -> torch.Tensor:
        h = self.unit(self.norm(x), mode=mode, state_noise=state_noise)  # (B, L, H)
        return x + F.glu(self.out(h), dim=-1)


class RecurrentClassifier(nn.Module):
    """Embedding -> stacked recurrent blocks -> class logits read from the last time step.

    Example:
        >>> model = RecurrentClassifier(CMRUConfig(unit="cmru", input_size=5, num_classes=4))
        >>> model(torch.randn(2, 50, 5)).shape
        torch.Size([2, 4])
    """

    def __init__(self, config: CMRUConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(config.input_size, config.hidden_size)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.num_hidden_layers)])
        self.norm = nn.LayerNorm(config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.num_classes)

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.config.input_size:
            raise ValueError(
                f"expected inputs of shape (B, L, {self.config.input_size}), got {tuple(x.shape)}; "
                "pass a batch of sequences with `input_size` features per step."
            )
        if x.shape[1] == 0 or x.shape[0] == 0:
            raise ValueError("empty batch or zero-length sequence; pass at least one step of one sequence.")
        if not torch.isfinite(x).all():
            raise ValueError("inputs contain NaN or inf; clean or impute them before the recurrent model.")

    def forward(
        self,
        x: torch.Tensor,
        mode: str = "scan",
        state_noise: float = 0.0,
        embedded: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, C). `embedded` lets callers pass a leaf tensor to measure gradients through time."""
        self._check(x)
        if state_noise < 0:
            raise ValueError(f"`state_noise` must be >= 0, got {state_noise}.")
        h = self.embed(x) if embedded is None else embedded  # (B, L, D)
        for block in self.blocks:
            h = block(h, mode=mode, state_noise=state_noise)
        return self.head(self.norm(h[:, -1]))

    def harden(self) -> None:
        """Turn every alpha-CMRU unit into a hard-quantized CMRU (deployment mode)."""
        for block in self.blocks:
            if isinstance(block.unit, MemoryUnit):
                block.unit.harden()


def gradient_through_time(model: RecurrentClassifier, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """||dLoss/du_t|| for every step t of the embedded input u (mean over the batch), shape (L,).

    The loss reads only the last step, so a value at t = 0 is credit that travelled the whole sequence.
    """
    model.zero_grad(set_to_none=True)
    emb = model.embed(x).detach().requires_grad_(True)  # (B, L, D)
    loss = F.cross_entropy(model(x, embedded=emb), y)
    (grad,) = torch.autograd.grad(loss, emb)
    return grad.norm(dim=-1).mean(dim=0)
