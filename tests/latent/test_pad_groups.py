"""Length-grouped prefill (`LatentModel.group_pads`): reading a padded batch in groups of similar length
gives the state one call gives, on every real position, and the same thoughts and text after it."""

import pytest
import torch

from latent import LatentModel
from latent.model import decoder_layers
from latent.pad_groups import pad_groups

SHORT = ["Tom has 3.", "Mia has 5.", "Leo had 2."]
LONG = (
    "Mia had 12 pencils and gave 5 to Leo, then bought "
    + "two more boxes of ten pencils and " * 6
    + "kept one."
)


def _groups(m: LatentModel, prompts):
    """How `prefill` would group these prompts' rows (None: one forward)."""
    return pad_groups(m.encode(prompts)["attention_mask"], decoder_layers(m.model), m.device)


def _read(m: LatentModel, grouped: bool, prompts, state=None, in_place=False):
    m.group_pads = grouped
    try:
        st = m.prefill(**m.encode(prompts), state=state, in_place=in_place)
        th, st2 = m.think(st, 3)
        g = m.generate(state=st2, max_new_tokens=6)
    finally:
        m.group_pads = True
    return st, th, g


def _assert_same_state(a, b):
    torch.testing.assert_close(a.attention_mask, b.attention_mask, rtol=0, atol=0)
    torch.testing.assert_close(a.position_ids(), b.position_ids(), rtol=0, atol=0)
    torch.testing.assert_close(a.next_position, b.next_position, rtol=0, atol=0)
    torch.testing.assert_close(a.last_hidden, b.last_hidden, rtol=1e-4, atol=1e-5)
    real = a.attention_mask.bool()
    for la, lb in zip(a.cache.layers, b.cache.layers, strict=True):
        torch.testing.assert_close(
            la.keys.transpose(1, 2)[real], lb.keys.transpose(1, 2)[real], rtol=1e-4, atol=1e-5
        )
        torch.testing.assert_close(
            la.values.transpose(1, 2)[real], lb.values.transpose(1, 2)[real], rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_grouped_prefill_equals_one_call(tiny_models, arch):
    m = tiny_models[arch]
    prompts = [*SHORT, LONG]
    with torch.no_grad():
        assert _groups(m, prompts) is not None  # the batch is grouped
    st_g, th_g, g_g = _read(m, True, prompts)
    st_1, th_1, g_1 = _read(m, False, prompts)
    _assert_same_state(st_g, st_1)
    torch.testing.assert_close(th_g, th_1, rtol=1e-4, atol=1e-5)
    assert g_g.tokens.tolist() == g_1.tokens.tolist()


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_grouped_prefill_after_a_state(tiny_models, arch):
    m = tiny_models[arch]
    base = m.prefill(**m.encode(["Some context.", "Other earlier words here."] * 2))
    prompts = [*SHORT, LONG]
    st_1, th_1, g_1 = _read(m, False, prompts, state=base)
    st_g, th_g, g_g = _read(m, True, prompts, state=base)
    assert base.length == st_1.length - m.encode(prompts)["input_ids"].shape[1]  # left unchanged
    _assert_same_state(st_g, st_1)
    torch.testing.assert_close(th_g, th_1, rtol=1e-4, atol=1e-5)
    assert g_g.tokens.tolist() == g_1.tokens.tolist()
    owned = base.copy()
    st_i, _, _ = _read(m, True, prompts, state=owned, in_place=True)
    assert st_i.cache is owned.cache
    _assert_same_state(st_i, st_1)


def test_no_grouping_for_similar_lengths_or_under_hooks(tiny_models):
    m = tiny_models["llama"]
    with torch.no_grad():
        assert _groups(m, SHORT) is None
        with m.capture([0]):
            assert _groups(m, [*SHORT, LONG]) is None
