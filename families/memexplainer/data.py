"""Synthetic event streams with a planted trigger that only the query node's memory can carry.

Each stream is a tiny temporal graph (nodes 0..n-1, node 0 is the query node) with one event per time
step t = 1..T. Raw event features are [noise, ..., noise, flag]. A stream is positive iff one event *of
the query node* carries flag = 1 (the trigger). The trigger is placed so that the query node has at least
`num_neighbors + 1` later events, hence it is outside the LastNeighborLoader window at query time
(t = T + 1): the attention layer cannot see it and only memory (the GRU state) carries it. Decoy flags on
events between other nodes (both classes) force the model to use the query node's own history.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import TemporalData

from .config import MemExplainerConfig

QUERY_NODE = 0


@dataclass
class EventStreams:
    """A batch of N independent streams of T events each (local node ids, step s happens at t = s + 1)."""

    src: torch.Tensor  # (N, T) long
    dst: torch.Tensor  # (N, T) long
    msg: torch.Tensor  # (N, T, F) float raw event features; the last feature is the trigger flag
    label: torch.Tensor  # (N,) float 0/1
    trigger_step: torch.Tensor  # (N,) long, step of the planted trigger, -1 for negatives
    num_nodes: int  # nodes per stream

    def __len__(self) -> int:
        return self.src.shape[0]

    @property
    def stream_length(self) -> int:
        return self.src.shape[1]

    def subset(self, idx: torch.Tensor | list[int] | slice) -> EventStreams:
        """The streams at `idx` (keeps the 2-D layout)."""
        return EventStreams(
            self.src[idx],
            self.dst[idx],
            self.msg[idx],
            self.label[idx],
            self.trigger_step[idx],
            self.num_nodes,
        )

    def to_temporal_data(
        self, keep: torch.Tensor | None = None, msg: torch.Tensor | None = None
    ) -> TemporalData:
        """Merge the streams into one time-ordered `TemporalData` with disjoint global node ids.

        Stream b's node i becomes b * num_nodes + i, so all streams run through one TGNMemory in
        parallel; events of the same step are one batch. `keep` (N, T) bool drops events (used to replay
        "only the selected events"); `msg` overrides the features (gradient baselines pass leaf tensors).
        Extra event attributes `stream` and `step` map each row back to (b, s).
        """
        check_streams(self)
        msg = self.msg if msg is None else msg
        n, length = self.src.shape
        keep = torch.ones(n, length, dtype=torch.bool) if keep is None else keep
        if keep.shape != (n, length) or keep.dtype != torch.bool:
            raise ValueError(f"`keep` must be a bool tensor of shape {(n, length)}, got {tuple(keep.shape)}.")
        # time-major order: all step-0 events of every stream, then step 1, ...
        step, stream = torch.nonzero(keep.T, as_tuple=True)
        offset = stream * self.num_nodes
        return TemporalData(
            src=self.src[stream, step] + offset,
            dst=self.dst[stream, step] + offset,
            t=step + 1,
            msg=msg[stream, step],
            stream=stream,
            step=step,
        )


def check_streams(s: EventStreams) -> None:
    """Raise ValueError naming the problem if a stream batch is malformed."""
    if len(s) == 0:
        raise ValueError("EventStreams is empty: generate at least one stream.")
    if s.src.shape != s.dst.shape or s.src.dim() != 2:
        raise ValueError(
            f"`src` and `dst` must both be (N, T), got {tuple(s.src.shape)} and {tuple(s.dst.shape)}."
        )
    if s.msg.dim() != 3 or s.msg.shape[:2] != s.src.shape:
        raise ValueError(
            f"`msg` must be (N, T, F) matching src {tuple(s.src.shape)}, got {tuple(s.msg.shape)}."
        )
    if not torch.isfinite(s.msg).all():
        raise ValueError("`msg` contains NaN or inf; clean the event features first.")
    if (s.src == s.dst).any():
        raise ValueError(
            "self-loop events (src == dst) are not supported: TGN's last aggregator would drop one."
        )
    if s.src.min() < 0 or s.dst.min() < 0 or max(s.src.max(), s.dst.max()) >= s.num_nodes:
        raise ValueError(f"node ids must lie in [0, num_nodes={s.num_nodes}).")


def _one_stream(rng: np.random.Generator, cfg: MemExplainerConfig, positive: bool) -> tuple:
    n, length, f = cfg.nodes_per_stream, cfg.stream_length, cfg.raw_msg_dim
    while True:
        src, dst = np.empty(length, dtype=np.int64), np.empty(length, dtype=np.int64)
        for s in range(length):
            if rng.random() < cfg.target_event_prob:
                pair = (QUERY_NODE, int(rng.integers(1, n)))
            else:
                pair = tuple(int(v) for v in rng.choice(np.arange(1, n), size=2, replace=False))
            src[s], dst[s] = pair if rng.random() < 0.5 else pair[::-1]
        own = np.flatnonzero((src == QUERY_NODE) | (dst == QUERY_NODE))
        # the trigger needs >= num_neighbors + 1 later query-node events (outside the window, "several back")
        slots = len(own) - cfg.num_neighbors - 1
        if slots >= 1:
            break
    msg = np.zeros((length, f), dtype=np.float32)
    msg[:, :-1] = rng.standard_normal((length, f - 1))
    others = np.setdiff1d(np.arange(length), own)
    msg[others, -1] = rng.random(len(others)) < cfg.decoy_prob  # decoys: flags between other nodes
    # negatives draw the same position so both classes see the same stream statistics
    trigger = int(own[rng.integers(0, slots)])
    if positive:
        msg[trigger, -1] = 1.0
    return src, dst, msg, trigger if positive else -1


def _dormancy_stream(rng: np.random.Generator, cfg: MemExplainerConfig, positive: bool) -> tuple:
    """Positive iff the query node is silent for `dormancy_gap` steps and then active again.

    The signal lives only in event *timing* (the time encoding of t - last update in the memory message);
    the flag and noise features are label-free, so an attribution over event features has nothing to find.
    Query-node gaps are 1-2 steps around the silence in positives and 1-3 steps in negatives, so both
    classes have about the same number of query-node events. The event that ends the silence (the
    trigger) has >= num_neighbors + 1 later query-node events, so it is outside the neighbour window.
    """
    n, length, f = cfg.nodes_per_stream, cfg.stream_length, cfg.raw_msg_dim
    while True:
        own, s = [], int(rng.integers(0, 2))
        ends_gap = int(rng.integers(1, 3))  # index in `own` of the event after the silence
        while s < length:
            own.append(s)
            if positive and len(own) == ends_gap:
                s += cfg.dormancy_gap
            else:
                s += int(rng.integers(1, 3 if positive else 4))
        if len(own) > ends_gap + cfg.num_neighbors + 1:
            break
    src, dst = np.empty(length, dtype=np.int64), np.empty(length, dtype=np.int64)
    is_own = np.zeros(length, dtype=bool)
    is_own[own] = True
    for t in range(length):
        if is_own[t]:
            pair = (QUERY_NODE, int(rng.integers(1, n)))
        else:
            pair = tuple(int(v) for v in rng.choice(np.arange(1, n), size=2, replace=False))
        src[t], dst[t] = pair if rng.random() < 0.5 else pair[::-1]
    msg = np.zeros((length, f), dtype=np.float32)
    msg[:, :-1] = rng.standard_normal((length, f - 1))
    msg[:, -1] = rng.random(length) < cfg.decoy_prob  # flags carry no label information here
    return src, dst, msg, own[ends_gap] if positive else -1


def make_streams(num_streams: int, cfg: MemExplainerConfig, seed: int) -> EventStreams:
    """`num_streams` balanced streams (label 1 iff the query node received the trigger flag)."""
    if num_streams < 1:
        raise ValueError(f"`num_streams` must be >= 1, got {num_streams}.")
    rng = np.random.default_rng(seed)
    labels = np.arange(num_streams) % 2 == 1
    rng.shuffle(labels)
    one = _dormancy_stream if cfg.task == "dormancy" else _one_stream
    parts = [one(rng, cfg, bool(y)) for y in labels]
    src, dst, msg, trig = (np.stack([p[i] for p in parts]) for i in range(4))
    return EventStreams(
        src=torch.from_numpy(src),
        dst=torch.from_numpy(dst),
        msg=torch.from_numpy(msg),
        label=torch.from_numpy(labels.astype(np.float32)),
        trigger_step=torch.from_numpy(trig),
        num_nodes=cfg.nodes_per_stream,
    )
