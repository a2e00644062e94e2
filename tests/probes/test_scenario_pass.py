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
