"""The one-pass scenario reader returns what the three separate calls return, in input order."""

from __future__ import annotations

import numpy as np
import pytest

from probes.activations import capture_items
from probes.data import af_scenarios
from probes.elicit import elicit_items, elicited_p_eval
from probes.scenario_pass import _shared, left_pad, length_order, read_scenarios
from probes.steering import generate_texts


def test_read_scenarios_matches_separate_capture_generate_and_elicit(probe_model):
    """Shared-prefix prefill + suffixes (left-padded twice) equals full prompts read one call at a time:
    same last-token activations, same greedy replies, same P(eval) and letter mass; mixed lengths and
    a batch that splits them, so the length ordering has to be undone."""
    m, _ = probe_model
    items = af_scenarios(n=2, seed=5)[::3]
    assert len({len(it.messages[-1]["content"]) for it in items}) > 1
    layers = [0, 1]
    got = read_scenarios(m, items, layers, max_new_tokens=6, batch_size=3)
    ref = capture_items(m, items, layers, "last", batch_size=len(items))
    for layer in layers:
        np.testing.assert_allclose(got.acts.acts[layer], ref.acts[layer], rtol=1e-4, atol=1e-5)
    assert got.acts.meta == ref.meta
    assert got.texts == generate_texts(m, items, max_new_tokens=6, batch_size=1)
    p_ref, mass_ref = elicited_p_eval(m, elicit_items(items), batch_size=1)
    np.testing.assert_allclose(got.p_eval, p_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.mass, mass_ref, rtol=1e-4, atol=1e-9)


def test_read_scenarios_without_elicitation_has_no_p_eval(probe_model):
    m, _ = probe_model
    got = read_scenarios(m, af_scenarios(n=1, seed=1)[:2], [1], max_new_tokens=2, elicit=False)
    assert got.p_eval is None and got.mass is None and len(got.texts) == 2


def test_shared_prefix_leaves_a_token_to_read_and_padding_is_left():
    assert _shared([1, 2, 3], [1, 2, 3]) == 2
    assert _shared([1, 2, 3, 4], [1, 2, 9]) == 2
    assert _shared([5], [5, 6]) == 0
    enc = left_pad([[7, 8, 9], [4]], pad_id=0, device="cpu")
    assert enc["input_ids"].tolist() == [[7, 8, 9], [0, 0, 4]]
    assert enc["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    assert length_order([3, 1, 2, 1]) == [1, 3, 2, 0]


def test_read_scenarios_rejects_empty_input(probe_model):
    m, _ = probe_model
    with pytest.raises(ValueError, match="empty"):
        read_scenarios(m, [], [0])


def test_base_model_without_chat_template_reads_a_plain_transcript(probe_model):
    """A tokenizer with no chat template (a base model) gets "Role: text" paragraphs ending in
    "Assistant:", answers after a space; the one-pass reader still matches the separate calls."""
    from probes.activations import render, transcript
    from probes.data import Item

    m, _ = probe_model
    saved = m.tokenizer.chat_template
    try:
        m.tokenizer.chat_template = None
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
        bos = m.tokenizer.bos_token or ""
        assert render(m, Item(msgs)) == f"{bos}System: Be brief.\n\nUser: Hi?\n\nAssistant:"
        assert render(m, Item(msgs, answer="(")) == render(m, Item(msgs)) + " ("
        with pytest.raises(ValueError, match="role"):
            transcript([{"role": "tool", "content": "x"}])
        items = af_scenarios(n=1, seed=2)[::4]
        got = read_scenarios(m, items, [1], max_new_tokens=3, batch_size=2)
        ref = capture_items(m, items, [1], "last", batch_size=1)
        np.testing.assert_allclose(got.acts.acts[1], ref.acts[1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got.p_eval, elicited_p_eval(m, elicit_items(items), 1)[0], rtol=1e-4)
    finally:
        m.tokenizer.chat_template = saved
