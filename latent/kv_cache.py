"""KV-cache operations on transformers 5.x `DynamicCache` objects: copy, select, crop, concat, size.

Shapes: B = batch, H = kv heads, T = cached positions, Dh = head dim. Each layer holds keys and
values of shape (B, H, T, Dh). Rotary/absolute positions are already baked into the keys, so
selecting positions keeps every kept entry at its original position.

Works on transformers 5.19-5.24: we only use `DynamicCache(config=...)`, `.update`, `.layers[i].keys/.values`
and `get_seq_length`, which exist unchanged across that range.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import Cache, DynamicLayer


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` that appends into buffers with spare room, so a decode step copies one position
    instead of the whole cache (`torch.cat` per step makes T decode steps cost O(T^2) copies; on a small
    model at a few hundred positions that copy is a third of the step). `keys`/`values` stay exactly
    the filled prefix (a view of the buffer), so everything that reads them is unchanged.

    With autograd recording (latent-aware training) it appends by concatenation, as `DynamicLayer` does:
    writing into a buffer in place would overwrite tensors the backward pass still needs."""

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if torch.is_grad_enabled() and (key_states.requires_grad or self.keys.requires_grad):
            self._kbuf = self._vbuf = None
            return super().update(key_states, value_states, *args, **kwargs)
        n = self.keys.shape[-2] if self.keys.numel() else 0
        t = key_states.shape[-2]
        if not self._owns_prefix(key_states) or n + t > self._kbuf.shape[-2]:
            self._grow(key_states, value_states, n, n + t)
        self._kbuf[..., n : n + t, :].copy_(key_states)
        self._vbuf[..., n : n + t, :].copy_(value_states)
        self.keys = self._kbuf[..., : n + t, :]
        self.values = self._vbuf[..., : n + t, :]
        return self.keys, self.values

    def _owns_prefix(self, key_states: torch.Tensor) -> bool:
        """True when `keys`/`values` are still the filled prefix of this layer's own buffers."""
        buf = self._kbuf
        if buf is None or self.keys.numel() == 0:
            return buf is not None and self.keys.numel() == 0 and buf.shape[:2] == key_states.shape[:2]
        return (
            all(
                t.data_ptr() == b.data_ptr() and t.stride() == b.stride() and t.shape[:2] == b.shape[:2]
                for t, b in ((self.keys, self._kbuf), (self.values, self._vbuf))
            )
            and buf.shape[:2] == key_states.shape[:2]
            and buf.dtype == key_states.dtype
        )

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, n: int, need: int) -> None:
        cap = need + max(64, need // 2)
        b, h, _, dk = key_states.shape
        kbuf = key_states.new_empty((b, h, cap, dk))
        vbuf = value_states.new_empty((b, h, cap, value_states.shape[-1]))
        if n:
            kbuf[..., :n, :].copy_(self.keys)
            vbuf[..., :n, :].copy_(self.values)
        self._kbuf, self._vbuf = kbuf, vbuf

    def fill(self, parts: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Start this (empty) layer with `parts` side by side along positions, each copied once into
        buffers with room to grow."""
        keys, values = parts[0]
        self.lazy_initialization(keys, values)
        n = sum(k.shape[-2] for k, _ in parts)
        self._grow(keys, values, 0, n)
        at = 0
        for k, v in parts:
            t = k.shape[-2]
            self._kbuf[..., at : at + t, :].copy_(k)
            self._vbuf[..., at : at + t, :].copy_(v)
            at += t
        self.keys, self.values = self._kbuf[..., :n, :], self._vbuf[..., :n, :]

    def take_rows(self, idx: torch.Tensor, room: int) -> GrowingLayer:
        """A new layer with only batch rows `idx`, keeping up to `room` spare positions. One copy: the rows
        are gathered straight out of this layer's buffers, spare room included (a gather followed by
        filling fresh buffers copies every position twice)."""
        out = GrowingLayer()
        n = self.keys.shape[-2]
        src_k, src_v = self.keys, self.values
        if self._owns_prefix(self.keys):
            end = min(n + room, self._kbuf.shape[-2])
            src_k, src_v = self._kbuf[..., :end, :], self._vbuf[..., :end, :]
        out.lazy_initialization(self.keys, self.values)
        out._kbuf, out._vbuf = src_k.index_select(0, idx), src_v.index_select(0, idx)
        out.keys, out.values = out._kbuf[..., :n, :], out._vbuf[..., :n, :]
        return out

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._kbuf = self._vbuf = None  # the next append must not overwrite what a cropped-off view holds


class GrowingCache(DynamicCache):
    """`DynamicCache` made of `GrowingLayer`s (one per layer, created on first write)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """An empty cache that keeps every position in every layer.

    Sliding-window layers are not truncated to their window: KV views, crops and concatenation need
    the same positions in every layer, and the window is applied by the attention mask instead
    (`latent.masks`)."""
    del model  # one layout for every architecture
    return GrowingCache()


def cache_length(cache: DynamicCache | None) -> int:
    """Number of cached positions (0 for `None` or an empty cache)."""
    return 0 if cache is None else int(cache.get_seq_length())


def layer_tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each (B, H, T, Dh); layers never written are skipped."""
    out = []
    for layer in cache.layers:
        keys = getattr(layer, "keys", None)
        if keys is None or keys.numel() == 0:
            continue
        out.append((keys, layer.values))
    return out


def cache_from_tensors(
    model: PreTrainedModel, tensors: list[tuple[torch.Tensor, torch.Tensor]]
) -> DynamicCache:
    """Build a fresh cache holding exactly `tensors` (one (keys, values) pair per layer)."""
    cache = new_cache(model)
    for idx, (keys, values) in enumerate(tensors):
        cache.update(keys, values, idx)
    return cache


def cache_from_parts(parts: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> DynamicCache:
    """A fresh cache whose layer i holds every part's layer-i (keys, values) side by side along positions
    (`parts[j][i]`, each (B, H, T_j, Dh)). Each position is copied once (a `torch.cat` followed by filling
    a cache copies it twice); with autograd recording the layers are concatenations, so gradients flow."""
    per_layer = list(zip(*parts, strict=True))
    if torch.is_grad_enabled() and any(k.requires_grad for layer in per_layer for k, _ in layer):
        tensors = [(torch.cat([k for k, _ in la], 2), torch.cat([v for _, v in la], 2)) for la in per_layer]
        return cache_from_tensors(None, tensors)
    out = GrowingCache()
    for idx, layer in enumerate(per_layer):
        while len(out.layers) <= idx:
            out.layers.append(GrowingLayer())
        out.layers[idx].fill(list(layer))
    return out


def select_rows(cache: DynamicCache, rows: torch.Tensor, room: int = 0) -> DynamicCache:
    """A new cache with only batch rows `rows` (1-D), in that order, and room for `room` more positions
    per layer where the source has it; `cache` is left unchanged. Each kept position is copied once."""
    out = GrowingCache()
    for layer in cache.layers:
        keys = getattr(layer, "keys", None)
        if keys is None or keys.numel() == 0:
            continue
        idx = rows.to(device=keys.device, dtype=torch.long)
        if isinstance(layer, GrowingLayer):
            out.layers.append(layer.take_rows(idx, room))
        else:
            new = GrowingLayer()
            new.update(keys.index_select(0, idx), layer.values.index_select(0, idx))
            out.layers.append(new)
    return out


def copy_cache(cache: DynamicCache) -> DynamicCache:
    """An independent copy: appending to it never changes the original (prefix sharing). Each layer's
    filled positions are copied once into a fresh `GrowingCache` (no spare room is copied); with autograd
    recording the copy is a concatenation, so gradients still flow back to whatever produced `cache`."""
    out = GrowingCache()
    for idx, (keys, values) in enumerate(layer_tensors(cache)):
        out.update(keys, values, idx)
    return out


def select_positions(model: PreTrainedModel, cache: DynamicCache, index: torch.Tensor) -> DynamicCache:
    """A new cache with only the cached positions in `index` (1-D, shared by all rows), in that order."""
    index = index.to(torch.long)
    if index.ndim != 1:
        raise ValueError(
            f"`index` must be 1-D (positions shared across the batch), got shape {tuple(index.shape)}."
        )
    n = cache_length(cache)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
        raise ValueError(f"position index out of range for a cache of {n} positions.")
    picked = []
    for keys, values in layer_tensors(cache):
        idx = index.to(keys.device)
        picked.append((keys.index_select(2, idx), values.index_select(2, idx)))  # (B, H, T', Dh)
    return cache_from_tensors(model, picked)


def crop_cache(model: PreTrainedModel, cache: DynamicCache, start: int, end: int) -> DynamicCache:
    """A new cache with positions [start, end)."""
    n = cache_length(cache)
    if not 0 <= start <= end <= n:
        raise ValueError(f"crop range [{start}, {end}) is outside the cache's 0..{n} positions.")
    return select_positions(model, cache, torch.arange(start, end))


def concat_caches(model: PreTrainedModel, caches: list[DynamicCache]) -> DynamicCache:
    """Concatenate caches along the sequence. Each keeps the positions baked into its keys, so this is
    only position-correct when the caches were computed at consecutive positions (a prefix and its
    continuation) or at disjoint, increasing positions (`WorkingMemory` places independent agents so);
    overlapping independent runs need a re-prefill (`WorkingMemory.state_for` does either)."""
    if not caches:
        raise ValueError("`caches` is empty: nothing to concatenate.")
    per_cache = [layer_tensors(c) for c in caches]
    n_layers = {len(t) for t in per_cache}
    if len(n_layers) != 1:
        raise ValueError(
            f"caches have different layer counts {sorted(n_layers)}: they come from different models."
        )
    joined = []
    for layer in zip(*per_cache):
        joined.append((torch.cat([k for k, _ in layer], dim=2), torch.cat([v for _, v in layer], dim=2)))
    return cache_from_tensors(model, joined)


def cache_nbytes(cache: DynamicCache | None) -> int:
    """Bytes held by keys and values (what a hand-off of this cache costs in memory)."""
    if cache is None:
        return 0
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layer_tensors(cache))
