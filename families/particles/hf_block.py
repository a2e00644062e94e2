"""Run one attention + MLP block of a Hugging Face decoder as particle dynamics on the sphere.

The block's weights are read directly from its modules (no forward hooks: capture is the job of
`latent/`), and the tokens evolve by
    x_i' = P_{x_i}[ Attn(Norm1(X))_i + MLP(Norm2(x_i)) ],
the continuous-depth idealisation of the residual update x <- x + Attn(...) + MLP(...) in which the
norm layers become the unit sphere (paper Sec. 6 treats this softmax-normalised attention). Positions
are ignored (no RoPE / position embedding), so tokens form a set, as in the paper's particle model.
The collapse diagnostic reports how many atoms the cloud forms and its mean pairwise cosine.

Letters: N = tokens, D = hidden size, H = heads, Hk = key/value heads, E = head dim, F = MLP width.
Supported layouts: Llama-style (Llama, Mistral, Qwen2/3: q/k/v/o_proj, gate/up/down_proj) and GPT-2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .model import find_clusters, sample_sphere, tangent

logger = logging.getLogger(__name__)


@dataclass
class BlockWeights:
    """Weights of one decoder block as plain float64 tensors; `act` is the MLP activation."""

    kind: str  # "llama" or "gpt2"
    n_heads: int
    n_kv_heads: int
    head_dim: int
    eps: float
    act: object
    w: dict[str, torch.Tensor] = field(default_factory=dict)


def _layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder-layer list of a causal-LM or base model (`latent.model.decoder_layers`)."""
    from latent.model import decoder_layers

    try:
        return decoder_layers(model)
    except TypeError as err:
        raise ValueError(f"{err} Pass a Llama/Mistral/Qwen2 or GPT-2 model.") from None


def _get(module: torch.nn.Module, name: str) -> torch.Tensor | None:
    """Detached float64 copy of a parameter, or None if the module has no such parameter."""
    t = getattr(module, name, None)
    return None if t is None else t.detach().to(torch.float64).clone()


def block_weights(model: torch.nn.Module, layer: int = 0) -> BlockWeights:
    """Read the attention + MLP weights of decoder layer `layer` of `model` (no hooks, no forward pass)."""
    from transformers.activations import ACT2FN

    layers = _layers(model)
    if not -len(layers) <= layer < len(layers):
        raise ValueError(f"`layer` must index one of the model's {len(layers)} decoder layers, got {layer}.")
    blk, cfg = layers[layer], model.config
    d = cfg.hidden_size
    n_heads = cfg.num_attention_heads
    if hasattr(blk, "self_attn") and hasattr(blk, "mlp") and hasattr(blk.mlp, "gate_proj"):
        at, mlp = blk.self_attn, blk.mlp
        w = {
            "norm1": _get(blk.input_layernorm, "weight"),
            "norm2": _get(blk.post_attention_layernorm, "weight"),
            "q": _get(at.q_proj, "weight"), "q_b": _get(at.q_proj, "bias"),
            "k": _get(at.k_proj, "weight"), "k_b": _get(at.k_proj, "bias"),
            "v": _get(at.v_proj, "weight"), "v_b": _get(at.v_proj, "bias"),
            "o": _get(at.o_proj, "weight"), "o_b": _get(at.o_proj, "bias"),
            "gate": _get(mlp.gate_proj, "weight"), "up": _get(mlp.up_proj, "weight"),
            "down": _get(mlp.down_proj, "weight"),
        }  # fmt: skip
        if hasattr(at, "q_norm"):  # Qwen3-style per-head RMSNorm on queries and keys
            w["q_norm"], w["k_norm"] = _get(at.q_norm, "weight"), _get(at.k_norm, "weight")
        head_dim = getattr(cfg, "head_dim", None) or d // n_heads
        n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
        return BlockWeights("llama", n_heads, n_kv, head_dim, cfg.rms_norm_eps, ACT2FN[cfg.hidden_act], w)
    if hasattr(blk, "attn") and hasattr(blk.attn, "c_attn"):
        w = {
            "ln1_w": _get(blk.ln_1, "weight"), "ln1_b": _get(blk.ln_1, "bias"),
            "ln2_w": _get(blk.ln_2, "weight"), "ln2_b": _get(blk.ln_2, "bias"),
            "qkv": _get(blk.attn.c_attn, "weight"), "qkv_b": _get(blk.attn.c_attn, "bias"),  # Conv1D: (D, 3D)
            "o": _get(blk.attn.c_proj, "weight"), "o_b": _get(blk.attn.c_proj, "bias"),
            "fc": _get(blk.mlp.c_fc, "weight"), "fc_b": _get(blk.mlp.c_fc, "bias"),
            "proj": _get(blk.mlp.c_proj, "weight"), "proj_b": _get(blk.mlp.c_proj, "bias"),
        }  # fmt: skip
        act = ACT2FN[cfg.activation_function]
        return BlockWeights("gpt2", n_heads, n_heads, d // n_heads, cfg.layer_norm_epsilon, act, w)
    raise ValueError(
        f"Unsupported decoder block {type(blk).__name__}: need Llama-style (self_attn.q_proj, mlp.gate_proj) "
        "or GPT-2 style (attn.c_attn, mlp.c_fc) submodules."
    )


def _lin(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return F.linear(x, w, b)


def _rms(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bw: BlockWeights, causal: bool
) -> torch.Tensor:
    """Softmax attention; q (N, H*E), k/v (N, Hk*E) -> (N, H*E)."""
    n = q.shape[0]
    q = q.view(n, bw.n_heads, bw.head_dim).transpose(0, 1)  # (H, N, E)
    k = k.view(n, bw.n_kv_heads, bw.head_dim).transpose(0, 1)  # (Hk, N, E)
    v = v.view(n, bw.n_kv_heads, bw.head_dim).transpose(0, 1)
    if "q_norm" in bw.w:
        q, k = _rms(q, bw.w["q_norm"], bw.eps), _rms(k, bw.w["k_norm"], bw.eps)
    rep = bw.n_heads // bw.n_kv_heads  # grouped-query attention shares each kv head across `rep` heads
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)  # (H, N, E)
    scores = q @ k.transpose(-1, -2) / bw.head_dim**0.5  # (H, N, N)
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, -1) @ v  # (H, N, E)
    return out.transpose(0, 1).reshape(n, -1)


def attn_update(x: torch.Tensor, bw: BlockWeights, causal: bool = True) -> torch.Tensor:
    """Attention branch Attn(Norm1(X)) of the block, (N, D) -> (N, D)."""
    w = bw.w
    if bw.kind == "llama":
        h = _rms(x, w["norm1"], bw.eps)
        a = _attention(
            _lin(h, w["q"], w["q_b"]), _lin(h, w["k"], w["k_b"]), _lin(h, w["v"], w["v_b"]), bw, causal
        )
        return _lin(a, w["o"], w["o_b"])
    h = F.layer_norm(x, x.shape[-1:], w["ln1_w"], w["ln1_b"], bw.eps)
    q, k, v = (h @ w["qkv"] + w["qkv_b"]).chunk(3, dim=-1)
    return _attention(q, k, v, bw, causal) @ w["o"] + w["o_b"]


def mlp_update(x: torch.Tensor, bw: BlockWeights) -> torch.Tensor:
    """MLP branch MLP(Norm2(x)) of the block, (N, D) -> (N, D)."""
    w = bw.w
    if bw.kind == "llama":
        h = _rms(x, w["norm2"], bw.eps)
        return _lin(bw.act(_lin(h, w["gate"], None)) * _lin(h, w["up"], None), w["down"], None)
    h = F.layer_norm(x, x.shape[-1:], w["ln2_w"], w["ln2_b"], bw.eps)
    return bw.act(h @ w["fc"] + w["fc_b"]) @ w["proj"] + w["proj_b"]


def residual_block(x: torch.Tensor, bw: BlockWeights, causal: bool = True) -> torch.Tensor:
    """The block's own discrete residual map x + Attn + MLP (sequential, as in HF), used to validate weights."""
    y = x + attn_update(x, bw, causal)
    return y + mlp_update(y, bw)


def block_velocity(x: torch.Tensor, bw: BlockWeights, causal: bool = True, mlp: bool = True) -> torch.Tensor:
    """Tangent field P_x[Attn(Norm1 X) + MLP(Norm2 x)] on the sphere; set mlp=False for attention only."""
    v = attn_update(x, bw, causal)
    if mlp:
        v = v + mlp_update(x, bw)
    return tangent(x, v)


@dataclass
class BlockDiagnostic:
    """Outcome of `block_particle_dynamics`: atoms at the end, mean pairwise cosine over time, final speed."""

    n_atoms: int
    largest_mass: float
    mean_cosine: np.ndarray
    times: np.ndarray
    final_speed: float
    x: torch.Tensor

    @property
    def collapsed(self) -> bool:
        """True when (almost) every token ended in one atom: the representation-collapse signature."""
        return self.largest_mass >= 0.9


def block_particle_dynamics(
    model: torch.nn.Module,
    layer: int = 0,
    n_tokens: int = 64,
    t_final: float = 20.0,
    dt: float = 0.05,
    x0: torch.Tensor | None = None,
    causal: bool = True,
    mlp: bool = True,
    radius: float = 0.05,
    seed: int = 0,
    max_angle: float = 0.02,
    max_steps: int = 5000,
) -> BlockDiagnostic:
    """Iterate the block as a particle ODE (projected Euler + renormalisation) and report clustering.

    The step is min(dt, max_angle / max speed), so no particle moves more than `max_angle` radians per
    step; `times[-1]` tells how far the budget of `max_steps` got.
    """
    if not dt > 0 or not t_final > 0 or not max_angle > 0 or max_steps < 1:
        raise ValueError(
            f"`dt`, `t_final`, `max_angle` and `max_steps` must be > 0, got dt={dt}, "
            f"t_final={t_final}, max_angle={max_angle}, max_steps={max_steps}."
        )
    bw = block_weights(model, layer)
    d = model.config.hidden_size
    if x0 is None:
        if n_tokens < 1:
            raise ValueError(f"`n_tokens` must be >= 1, got {n_tokens}.")
        x0 = sample_sphere(n_tokens, d, torch.Generator().manual_seed(seed))
    if x0.ndim != 2 or x0.shape[1] != d or not torch.isfinite(x0).all():
        raise ValueError(f"`x0` must be a finite (N, {d}) tensor (hidden size {d}), got {tuple(x0.shape)}.")
    x = (x0 / x0.norm(dim=-1, keepdim=True)).to(torch.float64)
    # Trained-scale weights give speeds of 10-100, so a fixed dt would jump across the sphere: cap each
    # Euler step at `max_angle` radians of motion (an adaptive dt), within a budget of `max_steps`.
    t, steps, next_rec = 0.0, 0, 0.0
    times, cos = [], []
    while True:
        if t >= next_rec or t >= t_final or steps >= max_steps:
            g = x @ x.T  # (N, N)
            times.append(t)
            cos.append(float((g.sum() - g.diagonal().sum()) / max(1, x.shape[0] * (x.shape[0] - 1))))
            next_rec += t_final / 50
        if t >= t_final or steps >= max_steps:
            break
        v = block_velocity(x, bw, causal, mlp)
        h = min(dt, t_final - t, max_angle / max(float(v.norm(dim=-1).max()), 1e-12))
        x = x + h * v
        x = x / x.norm(dim=-1, keepdim=True)
        t, steps = t + h, steps + 1
    if t < t_final:
        logger.warning(
            "block dynamics stopped at t=%.3g < t_final=%.3g after max_steps=%d", t, t_final, max_steps
        )
    cl = find_clusters(x, radius)
    speed = float(block_velocity(x, bw, causal, mlp).norm(dim=-1).max())
    return BlockDiagnostic(cl.count, float(cl.masses.max()), np.array(cos), np.array(times), speed, x)
