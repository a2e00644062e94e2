"""Cache operations keep logits equal to a fresh prefill of the same sequence."""

import torch

from latent.kv_cache import cache_length, cache_nbytes, concat_caches, copy_cache, crop_cache
from latent.state import LatentState


def test_crop_then_continue_equals_full_prefill(llama):
    """Cropping a cache to a prefix and re-reading the rest gives the same last hidden state."""
    ids = llama.encode(["Mia had 12 pencils and gave 5 to Leo. Then she found 7 more."])["input_ids"]
    full = llama.prefill(ids)
    t = ids.shape[1] // 2
    cropped = crop_cache(llama.model, full.cache, 0, t)
    prefix = LatentState(cropped, full.attention_mask[:, :t], full.last_hidden, torch.tensor([t]))
    cont = llama.prefill(ids[:, t:], state=prefix)
    torch.testing.assert_close(
        llama.logits(cont.last_hidden), llama.logits(full.last_hidden), rtol=1e-4, atol=1e-5
    )


def test_concat_of_crops_equals_original_and_decodes_the_same(llama):
    """concat(crop[0:t], crop[t:T]) is the original cache: the next step's logits match."""
    ids = llama.encode(["Tom has 23 apples. He buys 45 more. How many?"])["input_ids"]
    full = llama.prefill(ids)
    t, n = 5, ids.shape[1]
    joined = concat_caches(
        llama.model, [crop_cache(llama.model, full.cache, 0, t), crop_cache(llama.model, full.cache, t, n)]
    )
    assert cache_length(joined) == n and cache_nbytes(joined) == cache_nbytes(full.cache)
    rejoined = LatentState(joined, full.attention_mask.clone(), full.last_hidden, full.next_position.clone())
    nxt = torch.tensor([[7]])
    a, b = llama.prefill(nxt, state=full), llama.prefill(nxt, state=rejoined)
    torch.testing.assert_close(llama.logits(a.last_hidden), llama.logits(b.last_hidden), rtol=1e-5, atol=1e-6)


def test_copy_is_independent(llama):
    """Appending to a copied cache leaves the original untouched."""
    st = llama.prefill(llama.encode(["Tom has 23 apples."])["input_ids"])
    c = copy_cache(st.cache)
    llama.prefill(
        torch.tensor([[5, 6]]), state=LatentState(c, st.attention_mask, st.last_hidden, st.next_position)
    )
    assert cache_length(st.cache) == st.length


def test_nbytes_counts_every_layer(llama):
    """Size = layers x 2 (k, v) x B x kv_heads x T x head_dim x 4 bytes (fp32)."""
    st = llama.prefill(llama.encode(["Tom has 23 apples."])["input_ids"])
    cfg = llama.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    expected = cfg.num_hidden_layers * 2 * 1 * cfg.num_key_value_heads * st.length * head_dim * 4
    assert st.nbytes == expected
