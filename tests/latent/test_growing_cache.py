"""`GrowingCache`: appends into spare room, yet reads exactly like a concatenating `DynamicCache`."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from latent.kv_cache import GrowingCache, copy_cache, layer_tensors


def _steps(seed: int = 0, n: int = 40):
    g = torch.Generator().manual_seed(seed)
    first = (torch.randn(2, 3, 70, 4, generator=g), torch.randn(2, 3, 70, 4, generator=g))
    return [first] + [
        (torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, 4, generator=g)) for _ in range(n)
    ]


def test_appends_read_like_concatenation():
    grow, ref = GrowingCache(), DynamicCache()
    for k, v in _steps():
        gk, gv = grow.update(k, v, 0)
        rk, rv = ref.update(k, v, 0)
        assert torch.equal(gk, rk) and torch.equal(gv, rv)
    assert grow.get_seq_length() == ref.get_seq_length() == 110
    assert grow.layers[0]._kbuf.shape[2] > 110  # it did grow with spare room, not per step


def test_copies_and_crops_never_see_later_writes():
    cache = GrowingCache()
    steps = _steps(1, 5)
    for k, v in steps[:3]:
        cache.update(k, v, 0)
    held = layer_tensors(cache)[0][0]  # a reader keeps the keys of 72 positions
    snapshot = held.clone()
    twin = copy_cache(cache)
    cache.crop(-2)  # back to 70 positions, then append over the cropped slots
    cache.update(*steps[3], 0)
    twin.update(*steps[4], 0)
    assert torch.equal(held, snapshot)
    assert torch.equal(layer_tensors(twin)[0][0][:, :, :72], snapshot)
    assert torch.equal(layer_tensors(cache)[0][0][:, :, 70:], steps[3][0])


def test_with_autograd_it_concatenates_and_gradients_flow():
    cache = GrowingCache()
    k0 = torch.randn(1, 1, 3, 2, requires_grad=True)
    cache.update(k0, k0 * 2, 0)
    k1 = torch.randn(1, 1, 1, 2, requires_grad=True)
    keys, values = cache.update(k1, k1 * 2, 0)
    (keys.sum() + values.sum()).backward()
    assert torch.equal(k0.grad, torch.full_like(k0, 3.0)) and torch.equal(k1.grad, torch.full_like(k1, 3.0))
