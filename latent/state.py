"""`LatentState`: what a model has read so far (KV cache + masks + positions + last hidden state).

Shapes: B = batch, T = cached positions, D = hidden size. Rows are padded on the left (or after a prefix
every row shares, `latent.shared_prefix`): a row's pad positions are 0 in `attention_mask` and never
attended to; `next_position` counts only real positions, so a row's position ids are the same whatever
the batch it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from latent.kv_cache import cache_from_parts, cache_length, cache_nbytes, copy_cache, layer_tensors
from latent.kv_cache import select_rows as select_cache_rows


@dataclass
class LatentState:
    """A batch's shared working context.

    cache (`DynamicCache`): keys/values of all T positions read so far.
    attention_mask (`torch.LongTensor` (B, T)): 1 for real positions, 0 for pads.
    last_hidden (`torch.Tensor` (B, D)): last-layer hidden state (after the final norm, as
        `hidden_states[-1]` reports it) at each row's most recent position.
    next_position (`torch.LongTensor` (B,)): the position id the next token of each row gets.
    positions (`torch.LongTensor` (B, T), *optional*): the position id of every cached position (kept
        positions of a KV view keep theirs); None means "count real tokens", `(mask.cumsum(1) - 1)`.
        Sliding-window layers measure their window in these ids.
    """

    cache: DynamicCache
    attention_mask: torch.Tensor
    last_hidden: torch.Tensor
    next_position: torch.Tensor
    positions: torch.Tensor | None = None

    def position_ids(self) -> torch.Tensor:
        """(B, T) position ids of the cached positions (pads reuse the previous real id)."""
        if self.positions is not None:
            return self.positions
        return (self.attention_mask.cumsum(1) - 1).clamp_min(0)

    @property
    def batch_size(self) -> int:
        return int(self.attention_mask.shape[0])

    @property
    def length(self) -> int:
        """Cached positions (pads included)."""
        return int(self.attention_mask.shape[1])

    @property
    def nbytes(self) -> int:
        return cache_nbytes(self.cache)

    def copy(self) -> LatentState:
        """An independent copy (appending to it leaves this state unchanged)."""
        return LatentState(
            cache=copy_cache(self.cache),
            attention_mask=self.attention_mask.clone(),
            last_hidden=self.last_hidden.clone(),
            next_position=self.next_position.clone(),
            positions=None if self.positions is None else self.positions.clone(),
        )

    def repeat_rows(self, batch: int) -> LatentState:
        """A one-row state copied into `batch` rows (a prefix read once, then shared by a whole batch)."""
        if self.batch_size != 1:
            raise ValueError(f"`repeat_rows` needs a one-row state, got {self.batch_size} rows.")
        rows = [
            (k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in layer_tensors(self.cache)
        ]
        return LatentState(
            cache=cache_from_parts([rows]),  # each position copied once, into buffers with room to grow
            attention_mask=self.attention_mask.expand(batch, -1).clone(),
            last_hidden=self.last_hidden.expand(batch, -1).clone(),
            next_position=self.next_position.expand(batch).clone(),
            positions=None if self.positions is None else self.positions.expand(batch, -1).clone(),
        )

    def select_rows(self, rows: torch.Tensor, room: int = 0) -> LatentState:
        """A new state holding only the batch rows `rows` (1-D indices), in that order; this one is left
        unchanged. Decoding drops finished rows so, since every step reads each row's whole cache;
        `room` is how many more positions it will append (kept free where this state has them)."""
        idx = rows.to(device=self.attention_mask.device, dtype=torch.long)
        pick = lambda t: t.index_select(0, idx)  # noqa: E731
        return LatentState(
            cache=select_cache_rows(self.cache, idx, room),
            attention_mask=pick(self.attention_mask),
            last_hidden=pick(self.last_hidden),
            next_position=pick(self.next_position),
            positions=None if self.positions is None else pick(self.positions),
        )

    def mean_rows(self) -> LatentState:
        """A new state in which every row holds the mean over rows of the keys and values (a control that
        gives every row the same memory); masks and positions stay each row's own."""
        rows = self.batch_size
        parts = [
            (
                k.mean(0, keepdim=True).expand(rows, -1, -1, -1),
                v.mean(0, keepdim=True).expand(rows, -1, -1, -1),
            )
            for k, v in layer_tensors(self.cache)
        ]
        return LatentState(
            cache=cache_from_parts([parts]),
            attention_mask=self.attention_mask.clone(),
            last_hidden=self.last_hidden.mean(0, keepdim=True).expand(rows, -1).clone(),
            next_position=self.next_position.clone(),
            positions=None if self.positions is None else self.positions.clone(),
        )

    def check(self) -> None:
        """Internal consistency: mask length equals cache length."""
        assert cache_length(self.cache) == self.length, (cache_length(self.cache), self.length)
        assert self.positions is None or self.positions.shape == self.attention_mask.shape
