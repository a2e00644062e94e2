"""The Temporal Graph Network that MemExplainer explains, built from torch_geometric's temporal pieces.

Paper: Liu, Zhang, Xie, Xiong, "Towards the Explainability of Temporal Graph Networks via Memory
Backtracking and Topological Attribution", ICML 2026 (arXiv 2607.07716).
Reference code (read only, nothing copied): github.com/yazhengliu/MemExplainer.

Model = `TGNMemory` (identity messages [s_src, s_dst, x_e, cos time enc], last aggregator, GRU update)
+ one `TransformerConv` layer over the `LastNeighborLoader` window of the query node (node features =
memory, edge features = [x_e, time enc of (t_query - t_e)]) + MLP decoder -> one logit per stream.

Shapes: B streams, T steps, n nodes per stream, F raw features, d memory, E events in a merged batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.data import TemporalData
from torch_geometric.nn import TransformerConv
from torch_geometric.nn.models.tgn import IdentityMessage, LastAggregator, LastNeighborLoader, TGNMemory

from .config import MemExplainerConfig
from .data import QUERY_NODE, EventStreams, check_streams

logger = logging.getLogger(__name__)


@dataclass
class TGNRun:
    """Everything one forward pass produced, for the explainers that need internals."""

    logit: torch.Tensor  # (B,)
    data: TemporalData  # the merged, time-ordered events (rows carry `stream` and `step`)
    e_id: torch.Tensor  # (W,) rows of `data` in the query nodes' neighbour windows
    alpha: torch.Tensor  # (W, H) attention weights of those window events
    window_stream: torch.Tensor  # (W,) stream index of each window event


class MemTGN(nn.Module):
    """TGN with memory for per-stream binary prediction at query time t = T + 1.

    The memory always runs with TGNMemory's *eval* semantics (store the batch's messages, then update
    immediately), also while training: gradients flow through the whole stream (BPTT), which is what
    lets the GRU learn to keep a trigger for many updates. Events of one time step form one batch; in our
    streams every node has at most one event per step, so this equals event-by-event processing.

    Example:
        >>> from families.memexplainer.data import make_streams
        >>> cfg = MemExplainerConfig()
        >>> MemTGN(cfg)(make_streams(3, cfg, seed=0)).shape
        torch.Size([3])
    """

    def __init__(self, cfg: MemExplainerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d, tdim, f = cfg.memory_dim, cfg.time_dim, cfg.raw_msg_dim
        self.memory = TGNMemory(1, f, d, tdim, IdentityMessage(f, d, tdim), LastAggregator())
        self.memory.train(False)
        self.conv = TransformerConv(d, cfg.hidden_size, heads=cfg.num_attention_heads, edge_dim=f + tdim)
        self.lin1 = nn.Linear(cfg.num_attention_heads * cfg.hidden_size, cfg.decoder_hidden_size)
        self.lin2 = nn.Linear(cfg.decoder_hidden_size, 1)

    def train(self, mode: bool = True) -> MemTGN:
        """Switch train/eval for everything but the memory, which keeps eval semantics (see class doc)."""
        super().train(mode)
        # TGNMemory.train(False) would flush its message store into *all* nodes (GRU on a zero message)
        self.memory.training = False
        return self

    def _reset_memory(self, num_nodes: int) -> None:
        """Fresh zero memory for `num_nodes` nodes (new tensors, so no autograd graph carries over)."""
        mem = self.memory
        mem.num_nodes = num_nodes
        mem.memory = torch.zeros(num_nodes, self.cfg.memory_dim, dtype=mem.time_enc.lin.weight.dtype)
        mem.last_update = torch.zeros(num_nodes, dtype=torch.long)
        mem._assoc = torch.empty(num_nodes, dtype=torch.long)
        mem.reset_state()

    def run(
        self, streams: EventStreams, keep: torch.Tensor | None = None, msg: torch.Tensor | None = None
    ) -> TGNRun:
        """Replay the streams (optionally only the `keep` events, or with features `msg`) and predict."""
        check_streams(streams)
        if streams.msg.shape[-1] != self.cfg.raw_msg_dim:
            raise ValueError(f"streams have {streams.msg.shape[-1]} features, model expects raw_msg_dim.")
        dtype = self.lin1.weight.dtype
        data = streams.to_temporal_data(keep, (streams.msg if msg is None else msg).to(dtype))
        num_streams, n = len(streams), streams.num_nodes
        self._reset_memory(num_streams * n)
        loader = LastNeighborLoader(num_streams * n, size=self.cfg.num_neighbors)
        _, counts = torch.unique_consecutive(data.t, return_counts=True)
        start = 0
        for c in counts.tolist():  # one TGN batch per time step
            sl = slice(start, start + c)
            self.memory.update_state(data.src[sl], data.dst[sl], data.t[sl], data.msg[sl])
            loader.insert(data.src[sl], data.dst[sl])  # e_id = row of `data`
            start += c
        targets = torch.arange(num_streams) * n + QUERY_NODE
        n_id, edge_index, e_id = loader(targets)
        node_mem, _ = self.memory(n_id)  # (|n_id|, d)
        rel_t = (streams.stream_length + 1 - data.t[e_id]).to(dtype)
        edge_attr = torch.cat([data.msg[e_id], self.memory.time_enc(rel_t)], dim=-1)
        h, (_, alpha) = self.conv(node_mem, edge_index, edge_attr, return_attention_weights=True)
        h_query = h[torch.searchsorted(n_id, targets)]  # (B, H*C)
        logit = self.lin2(torch.relu(self.lin1(h_query))).squeeze(-1)
        return TGNRun(logit, data, e_id, alpha, data.stream[e_id])

    def forward(self, streams: EventStreams, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B,) of the query node of every stream at t = T + 1."""
        return self.run(streams, keep).logit


def train_tgn(cfg: MemExplainerConfig, train: EventStreams) -> MemTGN:
    """Fit a MemTGN with BCE on mini-batches of whole streams (full BPTT through the memory)."""
    check_streams(train)
    if train.num_nodes != cfg.nodes_per_stream or train.msg.shape[-1] != cfg.raw_msg_dim:
        raise ValueError("training streams do not match the config (`nodes_per_stream` / `raw_msg_dim`).")
    torch.manual_seed(cfg.seed)
    model = MemTGN(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.train_steps)
    gen = torch.Generator().manual_seed(cfg.seed)
    for step in range(cfg.train_steps):
        batch = train.subset(torch.randint(len(train), (cfg.batch_size,), generator=gen))
        loss = nn.functional.binary_cross_entropy_with_logits(model(batch), batch.label)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # BPTT through 20 GRU steps can spike
        opt.step()
        sched.step()
        if step % 50 == 0:
            logger.info("step %d loss %.4f", step, loss.item())
    model._reset_memory(1)  # drop the last batch's autograd graph held by the memory buffers
    return model.eval()


@torch.no_grad()
def accuracy(model: MemTGN, streams: EventStreams) -> float:
    """Fraction of streams whose sign of logit matches the label."""
    return ((model(streams) > 0).float() == streams.label).float().mean().item()
