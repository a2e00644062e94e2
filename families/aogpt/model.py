"""AO-GPT: a decoder-only transformer trained as an any-order autoregressive model (= masked diffusion ELBO).

Paper: Xue et al., "Any-Order GPT as Masked Diffusion Model: Decoupling Formulation and Architecture",
arXiv 2506.19935 (ICML 2026). Reference code github.com/scxue/AO-GPT-MDM has no licence: read for facts
only, nothing copied.

Slot i of the permuted sequence carries the token revealed at step i-1 (the [None] start token at
slot 0) with that token's own position, and predicts the token at the target position sigma(i); the
target position conditions every block through AdaLN (shift/scale/gate for attention and MLP).
Because the order is random, slot i learns p(x_t | revealed set) for *any* unrevealed t, which is what
makes parallel decoding of a block of positions valid.

Letters: B = batch, T = sequence length, S = slots in one forward, D = hidden size, H = heads, E = D/H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import AOGPTConfig


class AdaLNBlock(nn.Module):
    """Pre-norm transformer block whose norms are modulated by the target-position embedding."""

    def __init__(self, cfg: AOGPTConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.n_heads = cfg.num_attention_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ada = nn.Linear(cfg.target_pos_dim, 6 * d)
        nn.init.zeros_(self.ada.weight)  # zero init: the block starts as a plain pre-LN block with gate 1
        nn.init.zeros_(self.ada.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, mask: torch.Tensor,
                past: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, tuple]:  # fmt: skip
        """x (B, S, D), cond (B, S, P), mask (S, L+S) True = attend; past K/V (B, H, L, E). Returns x, (K, V)."""
        b, s, d = x.shape
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(cond).chunk(6, dim=-1)  # each (B, S, D)
        h = F.layer_norm(x, (d,)) * (1 + sc1) + sh1
        q, k, v = (
            self.qkv(h).view(b, s, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        )  # (B, H, S, E)
        if past is not None:
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)  # (B, H, L+S, E)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, S, E)
        x = x + (1 + g1) * self.proj(att.transpose(1, 2).reshape(b, s, d))
        h = F.layer_norm(x, (d,)) * (1 + sc2) + sh2
        return x + (1 + g2) * self.mlp(h), (k, v)


class AOGPT(nn.Module):
    """Any-order GPT. `forward` trains/scores under given orders; `sample` decodes blocks in parallel."""

    def __init__(self, cfg: AOGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d, t = cfg.hidden_size, cfg.block_size
        self.tok = nn.Embedding(cfg.vocab_size + 1, d)  # last id = [None] start token
        self.pos = nn.Embedding(t + 1, d)  # own position; index 0 is the [None] token's
        self.tgt = nn.Embedding(t, cfg.target_pos_dim)  # target position, fed to AdaLN
        self.blocks = nn.ModuleList(AdaLNBlock(cfg) for _ in range(cfg.num_hidden_layers))
        self.final_ada = nn.Linear(cfg.target_pos_dim, 2 * d)
        nn.init.zeros_(self.final_ada.weight)
        nn.init.zeros_(self.final_ada.bias)
        self.head = nn.Linear(d, cfg.vocab_size, bias=False)

    @property
    def none_id(self) -> int:
        """Token id of the [None] start token."""
        return self.cfg.vocab_size

    def _check(self, x: torch.Tensor, order: torch.Tensor | None = None) -> None:
        if x.ndim != 2 or x.shape[1] != self.cfg.block_size:
            raise ValueError(f"`x` must be (B, {self.cfg.block_size}) token ids, got {tuple(x.shape)}.")
        if x.numel() and (x.min() < 0 or x.max() >= self.cfg.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.cfg.vocab_size}).")
        if order is not None and (
            order.shape != x.shape
            or not torch.equal(order.sort(1).values, torch.arange(x.shape[1]).expand_as(order))
        ):
            raise ValueError("`order` must hold one permutation of range(T) per row, shape (B, T).")  # fmt: skip

    def slots(self, x: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inputs of the T training slots: token ids, own positions (0 = [None]), target positions. (B, T) each."""
        b = x.shape[0]
        prev = order[:, :-1]  # positions revealed before each slot
        inp = torch.cat([torch.full((b, 1), self.none_id), x.gather(1, prev)], 1)
        own = torch.cat([torch.zeros(b, 1, dtype=torch.long), prev + 1], 1)
        return inp, own, order

    def run(self, inp: torch.Tensor, own: torch.Tensor, tgt: torch.Tensor, mask: torch.Tensor,
            past: list | None = None) -> tuple[torch.Tensor, list]:  # fmt: skip
        """Logits (B, S, V) of slots (inp, own, tgt) under `mask` (S, L+S); returns new per-layer K/V too."""
        h = self.tok(inp) + self.pos(own)  # (B, S, D)
        cond = self.tgt(tgt)  # (B, S, P)
        kv = []
        for i, blk in enumerate(self.blocks):
            h, kvi = blk(h, cond, mask, None if past is None else past[i])
            kv.append(kvi)
        sh, sc = self.final_ada(cond).chunk(2, dim=-1)
        return self.head(F.layer_norm(h, h.shape[-1:]) * (1 + sc) + sh), kv

    def forward(self, x: torch.Tensor, order: torch.Tensor | None = None) -> torch.Tensor:
        """Per-token NLL (B, T) of x under the given orders (identity if None): -log p(x_sigma(i) | x_sigma(<i))."""
        self._check(x, order)
        order = torch.arange(x.shape[1]).expand_as(x) if order is None else order
        inp, own, tgt = self.slots(x, order)
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        logits, _ = self.run(inp, own, tgt, causal)
        return F.cross_entropy(logits.transpose(1, 2), x.gather(1, order), reduction="none")

    def sample_orders(self, b: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Training orders: uniform permutations with prob `random_ratio`, else left-to-right. (B, T)."""
        t = self.cfg.block_size
        rand = torch.rand(b, t, generator=generator).argsort(1)
        l2r = torch.rand(b, generator=generator) >= self.cfg.random_ratio
        rand[l2r] = torch.arange(t)
        return rand

    def loss(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Any-order AR training loss (mean nats per token), orders drawn by `sample_orders`."""
        return self.forward(x, self.sample_orders(x.shape[0], generator)).mean()

    # ----- parallel decoding ------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, n: int, steps: int, order: torch.Tensor | None = None, temperature: float = 1.0,
               use_cache: bool = True, generator: torch.Generator | None = None,
               return_logprob: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Generate n sequences, revealing T/steps positions per step in parallel (linear schedule).

        Each step runs (a) one slot per token revealed in the previous step except the last, causally,
        to enter the cache, and (b) one query per position of the new block; every query carries the last
        revealed token and a different target position and sees the cache, the new slots and itself
        only. With `use_cache=False` everything revealed so far is recomputed at every step (the
        reference the cached path must match). `return_logprob` also returns the (n,) log-probability
        of the sampled tokens under the (tempered) step distributions.
        """
        t = self.cfg.block_size
        if not 1 <= steps <= t:
            raise ValueError(f"`steps` must be in [1, {t}], got {steps}.")
        if not temperature > 0:
            raise ValueError(f"`temperature` must be > 0, got {temperature}.")
        order = torch.arange(t).expand(n, t) if order is None else order
        sizes = [len(c) for c in torch.arange(t).chunk(steps)]  # tokens revealed per step
        if order.shape != (n, t):
            raise ValueError(f"`order` must have shape ({n}, {t}), got {tuple(order.shape)}.")
        x = torch.zeros(n, t, dtype=torch.long)
        logp = torch.zeros(n, dtype=torch.float64)
        cache: list | None = None
        done = 0  # positions revealed so far (in order)
        cached = 0  # slots already in the cache
        for k in sizes:
            if use_cache:
                slot_ids = list(
                    range(cached, max(cached, done))
                )  # slots of newly revealed tokens but the last
                past_len = cached
            else:
                slot_ids, past_len, cache = list(range(0, max(0, done))), 0, None
            new_inp, new_own, new_tgt = self._slot_inputs(x, order, slot_ids)
            q_inp, q_own, _ = self._slot_inputs(x, order, [done])
            q_tgt = order[:, done : done + k]  # (n, k)
            inp = torch.cat([new_inp, q_inp.expand(n, k)], 1)
            own = torch.cat([new_own, q_own.expand(n, k)], 1)
            tgt = torch.cat([new_tgt, q_tgt], 1)
            mask = self._decode_mask(past_len, len(slot_ids), k)
            logits, kv = self.run(inp, own, tgt, mask, cache)
            probs = torch.softmax(logits[:, -k:] / temperature, -1)  # (n, k, V)
            tok = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).view(n, k)
            x.scatter_(1, q_tgt, tok)
            logp += torch.log(probs.gather(-1, tok[..., None])[..., 0]).double().sum(1)
            if use_cache:  # keep new slots and the first query (it is the training slot of the last token)
                keep = past_len + len(slot_ids) + 1
                cache = [(kk[:, :, :keep], vv[:, :, :keep]) for kk, vv in kv]
                cached = done + 1
            done += k
        return (x, logp) if return_logprob else x

    def _slot_inputs(self, x: torch.Tensor, order: torch.Tensor, ids: list[int]):
        """(token, own position, target position) of training slots `ids` (slot 0 = [None]). (n, len(ids))."""
        n = x.shape[0]
        if not ids:
            e = torch.zeros(n, 0, dtype=torch.long)
            return e, e, e
        idx = torch.tensor(ids)
        prev = order[:, (idx - 1).clamp(min=0)]
        inp = torch.where(idx == 0, self.none_id, x.gather(1, prev))
        own = torch.where(idx == 0, 0, prev + 1)
        tgt = order[:, idx.clamp(max=order.shape[1] - 1)]
        return inp, own, tgt

    @staticmethod
    def _decode_mask(past: int, new: int, queries: int) -> torch.Tensor:
        """(new+queries, past+new+queries) bool: new slots causal; each query sees past, new slots and itself."""
        s = new + queries
        m = torch.zeros(s, past + s, dtype=torch.bool)
        m[:, :past] = True
        m[:new, past : past + new] = torch.ones(new, new, dtype=torch.bool).tril()
        m[new:, past : past + new] = True
        m[new:, past + new :] = torch.eye(queries, dtype=torch.bool)
        return m


def bits_per_token(nll_nats: torch.Tensor) -> float:
    """Mean NLL in bits."""
    return float(nll_nats.mean()) / math.log(2)
