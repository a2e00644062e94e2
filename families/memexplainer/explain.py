"""MemExplainer: exact LRP of a TGN logit onto past events, and KL-optimal choice of k events.

The logit is decomposed through two trees (paper Sec. 3):
- the *topology attribution tree*: decoder MLP -> attention layer -> the query node's memory, each
  window neighbour's memory and each window edge's own features;
- the *memory backtracking tree*: every memory vector is split into the event that last updated it,
  the memory of the node itself before that update and the memory of the other endpoint, recursing back
  through earlier GRU updates (memoised on (update record, remaining depth)).

Rule (conservative by construction, checked to ~1e-12 in float64): every non-linearity is frozen at its
forward value, so each layer is *exactly* linear in its inputs around the actual input:
- ReLU -> mask (LRP-0 / gradient x input on a piecewise-linear net);
- attention softmax -> constant weights alpha (the "gates as constants" rule used for LSTMs/transformers);
- GRU: gates z, r constant; tanh(a) = g * a with gain g = tanh(a)/a in (0, 1] (no blow-up at a = 0).
Biases are *not* spread over inputs (the reference code puts them in no denominator and so spreads
them); they are kept as an explicit non-event term. The non-event terms are `bias`, `initial_memory`
(TGNMemory starts from zeros, so it is 0 but tracked) and `truncated_memory` (memory vectors left
unexpanded when `max_depth` cuts the tree; with max_depth = 0 this is all memory = topology tree only).
logit = sum(events) + bias + initial_memory + truncated_memory.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .config import MemExplainerConfig
from .data import QUERY_NODE, EventStreams, check_streams
from .model import MemTGN

NON_EVENT_TERMS = ("bias", "initial_memory", "truncated_memory")


@dataclass
class Explanation:
    """Additive decomposition of one stream's logit (float64)."""

    logit: float  # the logit recomputed by the explainer's replay (equals the model's)
    events: torch.Tensor  # (T,) contribution of the event at each step
    topology: torch.Tensor  # (T,) part of `events` that enters directly as a window edge's features
    bias: float
    initial_memory: float
    truncated_memory: float
    extra: dict = field(default_factory=dict)

    @property
    def non_event(self) -> float:
        """Sum of the terms that are not events (bias + initial memory + truncated memory)."""
        return self.bias + self.initial_memory + self.truncated_memory

    @property
    def total(self) -> float:
        """Sum of all terms; equals `logit` up to float64 round-off."""
        return float(self.events.sum()) + self.non_event


@dataclass
class _Record:
    """One GRU memory update, linearised: out = M_self s_prev + M_other s_other + event + bias."""

    step: int
    prev_self: int | None  # record index that produced the node's previous memory (None = initial)
    prev_other: int | None  # record index that produced the other endpoint's memory
    m_self: torch.Tensor  # (d, d)
    m_other: torch.Tensor  # (d, d)
    event: torch.Tensor  # (d,) share of the raw features + time encoding of this event
    bias: torch.Tensor  # (d,)
    out: torch.Tensor  # (d,) the new memory


def _p(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64)


def tanh_gain(a: torch.Tensor) -> torch.Tensor:
    """g = tanh(a) / a, with its limit 1 - a^2/3 near 0, so tanh(a) == g * a exactly at the input."""
    small = a.abs() < 1e-6
    return torch.where(small, 1 - a * a / 3, torch.tanh(a) / torch.where(small, torch.ones_like(a), a))


def linearise_gru(gru: torch.nn.GRUCell, msg: torch.Tensor, h: torch.Tensor, d: int) -> tuple:
    """Exact linear form of h' = GRUCell(msg, h) with msg = [h, s_other, feats] and gates frozen.

    Returns (M_self, M_other, W_feat, c, bias, out) with h' = M_self h + M_other s_other
    + c * (W_feat @ feats) + bias.
    """
    w_ir, w_iz, w_in = _p(gru.weight_ih).chunk(3)
    w_hr, w_hz, w_hn = _p(gru.weight_hh).chunk(3)
    b_ir, b_iz, b_in = _p(gru.bias_ih).chunk(3)
    b_hr, b_hz, b_hn = _p(gru.bias_hh).chunk(3)
    r = torch.sigmoid(w_ir @ msg + b_ir + w_hr @ h + b_hr)
    z = torch.sigmoid(w_iz @ msg + b_iz + w_hz @ h + b_hz)
    a = w_in @ msg + b_in + r * (w_hn @ h + b_hn)
    c = (1 - z) * tanh_gain(a)  # (1 - z) * tanh(a) == c * a
    m_self = torch.diag(z) + c[:, None] * (w_in[:, :d] + r[:, None] * w_hn)
    m_other = c[:, None] * w_in[:, d : 2 * d]
    bias = c * (b_in + r * b_hn)
    out = (1 - z) * torch.tanh(a) + z * h
    return m_self, m_other, w_in[:, 2 * d :], c, bias, out


def _time_enc(model: MemTGN, dt: float) -> torch.Tensor:
    lin = model.memory.time_enc.lin
    return torch.cos(_p(lin.weight)[:, 0] * dt + _p(lin.bias))


@torch.no_grad()
def explain_stream(
    model: MemTGN, streams: EventStreams, index: int, max_depth: int | None = None
) -> Explanation:
    """Decompose the logit of stream `index` into per-event contributions plus non-event terms."""
    check_streams(streams)
    if not 0 <= index < len(streams):
        raise ValueError(f"`index` must lie in [0, {len(streams)}), got {index}.")
    if max_depth is not None and max_depth < 0:
        raise ValueError(f"`max_depth` must be None or >= 0, got {max_depth}.")
    cfg, d = model.cfg, model.cfg.memory_dim
    src, dst = streams.src[index].tolist(), streams.dst[index].tolist()
    feats = _p(streams.msg[index])  # (T, F)
    length = len(src)
    mem = torch.zeros(streams.num_nodes, d, dtype=torch.float64)  # TGNMemory's initial memory
    last_t = [0] * streams.num_nodes
    last_rec: list[int | None] = [None] * streams.num_nodes
    records: list[_Record] = []
    # 1) replay the memory, storing the linearisation of every update (both endpoints of every event)
    for s in range(length):
        t, new = s + 1, []
        for a, b in ((src[s], dst[s]), (dst[s], src[s])):
            ev = torch.cat([feats[s], _time_enc(model, t - last_t[a])])
            m_self, m_other, w_f, c, bias, out = linearise_gru(
                model.memory.gru, torch.cat([mem[a], mem[b], ev]), mem[a], d
            )
            records.append(_Record(s, last_rec[a], last_rec[b], m_self, m_other, c * (w_f @ ev), bias, out))
            new.append((a, out, len(records) - 1))
        for a, out, r in new:  # both endpoints used pre-update memories
            mem[a], last_t[a], last_rec[a] = out, t, r
    # 2) topology tree: decoder and attention over the query node's last `num_neighbors` events
    conv, heads, ch = model.conv, cfg.num_attention_heads, cfg.hidden_size
    own = [s for s in range(length) if QUERY_NODE in (src[s], dst[s])][-cfg.num_neighbors :]
    nbr = [dst[s] if src[s] == QUERY_NODE else src[s] for s in own]
    edge = (
        torch.stack([torch.cat([feats[s], _time_enc(model, length + 1 - (s + 1))]) for s in own])
        if own
        else None
    )
    s_q = mem[QUERY_NODE]
    w_e = _p(conv.lin_edge.weight)
    h = _p(conv.lin_skip.weight) @ s_q + _p(conv.lin_skip.bias)
    alpha = torch.zeros(len(own), heads, dtype=torch.float64)
    if own:
        q = (_p(conv.lin_query.weight) @ s_q + _p(conv.lin_query.bias)).view(heads, ch)
        e_proj = (edge @ w_e.T).view(-1, heads, ch)
        k = (mem[nbr] @ _p(conv.lin_key.weight).T + _p(conv.lin_key.bias)).view(-1, heads, ch) + e_proj
        v = (mem[nbr] @ _p(conv.lin_value.weight).T + _p(conv.lin_value.bias)).view(-1, heads, ch) + e_proj
        alpha = torch.softmax((k * q).sum(-1) / math.sqrt(ch), dim=0)  # (W, H), frozen below
        h = h + (alpha[:, :, None] * v).sum(0).reshape(-1)
    a1 = _p(model.lin1.weight) @ h + _p(model.lin1.bias)
    w2 = _p(model.lin2.weight)[0] * (a1 > 0)  # ReLU frozen as a mask
    logit = float(w2 @ a1 + _p(model.lin2.bias)[0])
    g_h = _p(model.lin1.weight).T @ w2  # d logit / d h of the linearised head, (H*C,)
    bias = float(w2 @ _p(model.lin1.bias) + _p(model.lin2.bias)[0] + g_h @ _p(conv.lin_skip.bias))
    coef = torch.zeros(streams.num_nodes, d, dtype=torch.float64)  # row vector on each node's memory
    coef[QUERY_NODE] += _p(conv.lin_skip.weight).T @ g_h
    topology = torch.zeros(length, dtype=torch.float64)
    for i, s in enumerate(own):
        g_w = (g_h.view(heads, ch) * alpha[i][:, None]).reshape(-1)
        coef[nbr[i]] += _p(conv.lin_value.weight).T @ g_w
        topology[s] += g_w @ (w_e @ edge[i])
        bias += float(g_w @ _p(conv.lin_value.bias))
    # 3) memory backtracking tree for every memory vector with a non-zero coefficient
    rows = _memory_tree(records, length, d, max_depth, last_rec, coef)
    events = topology + rows[:length]
    return Explanation(
        logit=logit,
        events=events,
        topology=topology,
        bias=bias + float(rows[length]),
        initial_memory=float(rows[length + 1]),
        truncated_memory=float(rows[length + 2]),
        extra={"window_steps": own, "attention": alpha},
    )


def _memory_tree(
    records: list[_Record], length: int, d: int, max_depth: int | None, last_rec: list, coef: torch.Tensor
) -> torch.Tensor:
    """Project every node's current memory on `coef` and split it into (events, bias, init, truncated)."""
    bias_row, init_row, trunc_row = length, length + 1, length + 2
    memo: dict[tuple, torch.Tensor] = {}
    initial = torch.zeros(d, dtype=torch.float64)  # TGNMemory.reset_state() starts every node at 0

    def tree(r: int | None, depth: int | None) -> torch.Tensor:
        """(T + 3, d) rows whose column sums rebuild the memory vector produced by record r."""
        key = (r, depth)
        if key in memo:
            return memo[key]
        out = torch.zeros(length + 3, d, dtype=torch.float64)
        if r is None:  # the node's initial memory, tracked as its own term (zeros in TGNMemory)
            out[init_row] = initial
        elif depth == 0:
            out[trunc_row] = records[r].out
        else:
            rec, nd = records[r], None if depth is None else depth - 1
            out[rec.step] += rec.event
            out[bias_row] += rec.bias
            out += tree(rec.prev_self, nd) @ rec.m_self.T
            out += tree(rec.prev_other, nd) @ rec.m_other.T
        memo[key] = out
        return out

    total = torch.zeros(length + 3, dtype=torch.float64)
    for node, r in enumerate(last_rec):
        if coef[node].abs().sum() > 0:
            total += tree(r, max_depth) @ coef[node]
    return total


def explain_streams(model: MemTGN, streams: EventStreams, max_depth: int | None = None) -> list[Explanation]:
    """`explain_stream` for every stream."""
    return [explain_stream(model, streams, i, max_depth) for i in range(len(streams))]


# ---------------------------------------------------------------------------------------------
# Choosing k events: KL(Bern(sigmoid(z)) || Bern(sigmoid(b + sum_S c))) is convex in s = sum_S c with
# its minimum at s = z - b, so the optimum is the closest k-subset sum from below or from above.


def bernoulli_kl_logits(z: np.ndarray | float, s: np.ndarray | float) -> np.ndarray:
    """KL(Bern(sigmoid(z)) || Bern(sigmoid(s))) = softplus(s) - softplus(z) - p (s - z), stable."""
    z, s = np.asarray(z, dtype=np.float64), np.asarray(s, dtype=np.float64)
    p = 1.0 / (1.0 + np.exp(-z))
    return np.maximum(np.logaddexp(0.0, s) - np.logaddexp(0.0, z) - p * (s - z), 0.0)


def _closest_subset_milp(c: np.ndarray, k: int, target: float, below: bool) -> np.ndarray | None:
    """k-subset of c with the largest sum <= target (below) or smallest sum >= target, via HiGHS."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(c)
    card = LinearConstraint(np.ones((1, n)), k, k)
    side = LinearConstraint(c[None], -np.inf, target) if below else LinearConstraint(c[None], target, np.inf)
    res = milp(
        -c if below else c,
        constraints=[card, side],
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0},
    )
    if res.x is None:  # that side is infeasible
        return None
    return np.flatnonzero(res.x > 0.5)


def _relaxed_selection(c: np.ndarray, k: int, logit: float, base: float) -> np.ndarray:
    """The reference code's relaxation: x in [0, 1]^n, sum x = k, minimise the KL in s = base + c.x
    (convex: softplus(s) - p s plus constants), solved by cvxpy; keep the k largest x."""
    import cvxpy as cp

    x = cp.Variable(c.size)
    p = 1.0 / (1.0 + np.exp(-logit))
    s = base + c @ x
    problem = cp.Problem(cp.Minimize(cp.logistic(s) - p * s), [cp.sum(x) == k, x >= 0, x <= 1])
    problem.solve(solver=cp.CLARABEL if "CLARABEL" in cp.installed_solvers() else cp.SCS)
    if x.value is None:
        raise RuntimeError(f"cvxpy could not solve the relaxed selection ({problem.status}).")
    return np.argsort(-x.value, kind="stable")[:k]


def select_events(
    contrib: np.ndarray,
    logit: float,
    base: float,
    k: int,
    method: str = "kl",
    exhaustive_limit: int = 20000,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Indices of k events chosen from fixed contributions `contrib`.

    method "kl": exact minimiser of KL(Bern(sigmoid(logit)) || Bern(sigmoid(base + sum_S c))) over
    |S| = k among events with non-zero contribution (exhaustive when C(n, k) <= exhaustive_limit,
    else two HiGHS MILPs for the closest subset sum below / above logit - base).
    method "relaxed": the reference code's convex relaxation (x in [0, 1], sum x = k), then the k
    largest x; ties inside the relaxation's optimal face are broken by the solver.
    method "topk": the k largest contributions towards the predicted class, sign(logit) * c.
    Events outside the explanation (c == 0 exactly) only fill the set, at random, when fewer than k
    events have a contribution.
    """
    c = np.asarray(contrib, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.isfinite(c).all():
        raise ValueError("`contrib` must be a non-empty 1-D array of finite contributions.")
    if not 1 <= k <= c.size:
        raise ValueError(f"`k` must lie in [1, {c.size}], got {k}.")
    if method not in ("kl", "topk", "relaxed"):
        raise ValueError(f"`method` must be 'kl', 'relaxed' or 'topk', got {method!r}.")
    rng = rng or np.random.default_rng(0)
    cand = np.flatnonzero(c != 0.0)
    kk = min(k, cand.size)
    if kk == 0:
        chosen = np.empty(0, dtype=np.int64)
    elif method == "topk":
        sign = 1.0 if logit >= 0 else -1.0
        chosen = cand[np.lexsort((rng.random(cand.size), -sign * c[cand]))[:kk]]
    elif method == "relaxed":
        chosen = cand[_relaxed_selection(c[cand], kk, logit, base)]
    elif math.comb(cand.size, kk) <= exhaustive_limit:
        combos = np.array(list(itertools.combinations(range(cand.size), kk)))
        obj = bernoulli_kl_logits(logit, base + c[cand][combos].sum(1))
        chosen = cand[combos[int(np.argmin(obj))]]
    else:
        options = [
            s
            for s in (_closest_subset_milp(c[cand], kk, logit - base, b) for b in (True, False))
            if s is not None
        ]
        obj = [float(bernoulli_kl_logits(logit, base + c[cand][s].sum())) for s in options]
        chosen = cand[options[int(np.argmin(obj))]]
    if kk < k:  # pad with events the explanation gives nothing to
        rest = np.setdiff1d(np.arange(c.size), cand)
        chosen = np.concatenate([chosen, rng.choice(rest, size=k - kk, replace=False)])
    return np.sort(chosen)


def choose_events(
    expl: Explanation, k: int, cfg: MemExplainerConfig, rng: np.random.Generator | None = None
) -> np.ndarray:
    """`select_events` with the config's rule: `selection`, `include_bias` (b = non-event terms), limit."""
    base = expl.non_event if cfg.include_bias else 0.0
    return select_events(expl.events.numpy(), expl.logit, base, k, cfg.selection, cfg.exhaustive_limit, rng)
