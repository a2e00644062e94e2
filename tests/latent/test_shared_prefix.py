"""A prompt's shared prefix is read once per batch, and the states match reading every row in full."""

from __future__ import annotations

import pytest
import torch

from latent import LatentModel
from latent.memory import WorkingMemory
from latent.shared_prefix import split_shared_prefix

SYSTEM = "You are a careful solver. Answer with one number and show each step first."
QUESTIONS = ["What is 2 + 3?", "Tom has 7 apples and eats 2. How many are left now?", "9 - 4?"]


def _encode(model: LatentModel, system: str = SYSTEM):
    return model.encode(
        [[{"role": "system", "content": system}, {"role": "user", "content": q}] for q in QUESTIONS]
    )


def test_split_moves_the_common_prefix_to_the_front():
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [5, 6, 7, 9, 9, 9], [0, 5, 6, 7, 3, 4]])
    mask = (ids != 0).long()
    split = split_shared_prefix(ids, mask, pad_id=0, min_shared=2)
    assert split.length == 3
    assert split.input_ids.tolist() == [[5, 6, 7, 0, 0, 8], [5, 6, 7, 9, 9, 9], [5, 6, 7, 0, 3, 4]]
    assert split.attention_mask.tolist() == [[1, 1, 1, 0, 0, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 1, 1]]
    for r in range(3):  # each row keeps its tokens, in order
        assert split.input_ids[r][split.attention_mask[r].bool()].tolist() == ids[r][mask[r].bool()].tolist()


def test_split_leaves_a_token_per_row_and_declines_small_cases():
    same = torch.tensor([[4, 5, 6], [4, 5, 6]])
    split = split_shared_prefix(same, torch.ones_like(same), pad_id=0, min_shared=2)
    assert split.length == 2  # the last token is read per row, so each row's last hidden state is its own
    assert split_shared_prefix(same, torch.ones_like(same), pad_id=0, min_shared=3) is None
    assert split_shared_prefix(same[:1], torch.ones_like(same[:1]), pad_id=0, min_shared=1) is None


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
def test_shared_prefix_states_equal_full_reads(tiny_models, arch):
    """First a prompt read from nothing, then a second independent one (on rotary models it starts after
    the first's positions): the shared-prefix read and the full read give the same hidden states and the
    same greedy continuation, for absolute positions (GPT-2) and sliding windows (Gemma 3) too."""
    model = tiny_models[arch]
    enc = _encode(model)
    outs = {}
    for share in (True, False):
        mem = WorkingMemory(model, share_prefixes=share)
        first, _ = mem.write_tokens("a", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        second, _ = mem.write_tokens("b", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        gen = model.generate(state=second, max_new_tokens=6)
        outs[share] = (first, second, gen, mem)
    (f1, s1, g1, mem), (f0, s0, g0, _) = outs[True], outs[False]
    assert mem.segments[0].mask[:, :8].all()  # the prefix really was shared
    for a, b in ((f1, f0), (s1, s0)):
        assert torch.allclose(a.last_hidden, b.last_hidden, atol=1e-5)
        real_a = a.position_ids().masked_fill(a.attention_mask == 0, -1).sort(1).values
        real_b = b.position_ids().masked_fill(b.attention_mask == 0, -1).sort(1).values
        assert torch.equal(real_a, real_b)  # every real token at the same position id
        assert torch.equal(a.next_position, b.next_position)
    assert torch.allclose(s1.last_hidden, f1.last_hidden, atol=1e-4)  # shifted or not, the same prompt
    assert g1.texts == g0.texts


def test_fresh_contexts_start_at_one_position_in_every_row(llama):
    enc = _encode(llama)
    mem = WorkingMemory(llama)
    first, _ = mem.write_tokens("a", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    second, _ = mem.write_tokens("b", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    starts = second.position_ids().masked_fill(second.attention_mask == 0, 10**6).amin(1)
    assert starts.tolist() == [int(first.next_position.max())] * len(QUESTIONS)


def test_write_tokens_extends_an_owned_state_in_place_and_copies_a_held_one(tiny_models):
    """`owned=True` (a state from `state_for`) is extended in place; without it the memory's own states are
    never changed, and both give the same new state."""
    m = tiny_models["llama"]
    mem = WorkingMemory(m)
    enc = _encode(m)
    first, sid = mem.write_tokens("a", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    n = first.length
    more = m.encode(["next", "then more", "ok"])
    held = mem.state_for([sid])
    copied, _ = mem.write_tokens("b", "prompt", more["input_ids"], more["attention_mask"], held, [sid])
    assert held.cache.get_seq_length() == n  # not owned: the state handed in is left as it was
    owned, _ = mem.write_tokens(
        "c", "prompt", more["input_ids"], more["attention_mask"], held, [sid], owned=True
    )
    assert owned.cache is held.cache and held.cache.get_seq_length() == copied.length
    assert first.cache.get_seq_length() == n  # the memory's placed state is never touched
    torch.testing.assert_close(owned.last_hidden, copied.last_hidden, rtol=1e-5, atol=1e-6)


def test_an_empty_state_with_per_row_starts_is_read_row_by_row(llama):
    """A caller's empty state whose rows start at different positions is not prefix-shared (one prefix
    read has one position): every row keeps its own start, as in a full read."""
    enc = _encode(llama)
    starts = torch.tensor([0, 5, 9])
    outs = {}
    for share in (True, False):
        mem = WorkingMemory(llama, share_prefixes=share)
        st, _ = mem.write_tokens(
            "a", "prompt", enc["input_ids"], enc["attention_mask"], llama.empty_state(starts), []
        )
        outs[share] = st
    assert torch.equal(outs[True].next_position, outs[False].next_position)
    assert torch.equal(outs[True].position_ids(), outs[False].position_ids())
    assert torch.allclose(outs[True].last_hidden, outs[False].last_hidden, atol=1e-5)


def test_owned_thoughts_extend_the_prompt_state_and_the_prompt_stays_readable(llama):
    """`write_latent(owned=True)` thinks on the memory's prompt state in place (the memory releases it);
    the prompt alone is then served from the longer state, with the keys it was computed with."""
    enc = _encode(llama)
    mem = WorkingMemory(llama)
    prompt, pid = mem.write_tokens("a", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    n = prompt.length
    ref = prompt.copy()
    thought, lid = mem.write_latent("a", prompt, 3, [pid], owned=True)
    assert thought.cache is prompt.cache and thought.length == n + 3  # no copy
    again = mem.state_for([pid])
    assert again.length == n and mem.reprefills == 0
    for got, want in zip(again.cache.layers, ref.cache.layers, strict=True):
        torch.testing.assert_close(got.keys, want.keys)
        torch.testing.assert_close(got.values, want.values)
    torch.testing.assert_close(again.attention_mask, ref.attention_mask)
    assert mem.state_for([pid, lid]).length == n + 3
