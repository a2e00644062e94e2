"""Steering: zero vector is a no-op, random controls match the norm, sweeps carry their controls."""

import numpy as np
import pytest
import torch

from probes.data import af_scenarios, neutral_texts
from probes.steering import SteerSpec, generate_texts, perplexity, random_like, sweep


def test_zero_vector_leaves_generate_unchanged(probe_model):
    """Adding a zero vector (any alpha) gives token-identical greedy output; a large vector changes it."""
    m, _ = probe_model
    items = af_scenarios(n=2, assertions=("none",))
    base = generate_texts(m, items, max_new_tokens=6)
    zero = SteerSpec(1, torch.zeros(m.hidden_size), alpha=10.0)
    assert generate_texts(m, items, zero, max_new_tokens=6) == base
    big = SteerSpec(0, torch.randn(m.hidden_size) * 50)
    assert generate_texts(m, items, big, max_new_tokens=6) != base


def test_random_controls_have_the_same_norm():
    """random_like keeps the exact norm and differs in direction."""
    v = torch.randn(64) * 3.7
    for seed in range(3):
        r = random_like(v, seed)
        assert r.norm().item() == pytest.approx(v.norm().item(), rel=1e-6)
        assert abs(torch.nn.functional.cosine_similarity(r, v, dim=0)) < 0.6
    with pytest.raises(ValueError, match="1-D"):
        random_like(torch.zeros(2, 3))


def test_perplexity_guard_and_sweep_rows(probe_model):
    """Zero steering keeps perplexity; the sweep reports baseline, direction and random rows."""
    m, _ = probe_model
    texts = neutral_texts(3)
    base = perplexity(m, texts)
    assert perplexity(m, texts, SteerSpec(0, torch.zeros(m.hidden_size))) == pytest.approx(base, rel=1e-5)
    items = af_scenarios(n=1, assertions=("none",), researcher=(False,))
    d = np.random.default_rng(0).standard_normal(m.hidden_size)
    rows = sweep(m, items, {1: d}, {1: 5.0}, [0.5, 20.0], lambda t: float(len(t[0])), texts, max_new_tokens=3)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("baseline") == 1 and kinds.count("direction") == 2 and kinds.count("random") == 2
    assert not rows[-1]["coherent"] or rows[-1]["ppl"] <= 1.5 * base  # flag agrees with the measured ppl
    with pytest.raises(ValueError, match="norm"):
        sweep(m, items, {0: d}, {1: 1.0}, [1.0], lambda t: 0.0, texts)
    with pytest.raises(ValueError, match="out of range"):
        generate_texts(m, items, SteerSpec(7, torch.zeros(m.hidden_size)))


def test_reply_logprob_matches_unpadded_forward_and_batches(probe_model):
    """log P(reply | prompt) in a left-padded batch equals a single unpadded forward's token sum."""
    m, _ = probe_model
    from probes.activations import render
    from probes.steering import reply_logprob

    items = af_scenarios(n=1, assertions=("none",))[:2]
    replies = ["<rejected/>", "\\boxed{12}"]
    batched = reply_logprob(m, items, replies)
    for it, r, got in zip(items, replies, batched):
        prompt = render(m, it)
        ids = m.tokenizer(prompt + r, return_tensors="pt", add_special_tokens=False)["input_ids"]
        n = ids.shape[1] - len(m.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            logp = m.model(input_ids=ids).logits.float().log_softmax(-1)[0, :-1]
        want = logp.gather(-1, ids[0, 1:, None]).squeeze(-1)[-n:].sum().item()
        assert got == pytest.approx(want, abs=1e-3)
    with pytest.raises(ValueError, match="one reply per item"):
        reply_logprob(m, items, replies[:1])
