"""The latent interface on Gemma-3-270m: embeddings scaled inside the embedding module, tied
embeddings, sliding-window layers. References are plain transformers calls written here."""

from __future__ import annotations

import torch

TEXTS = [
    "The capital of France is",
    "Water boils at a temperature of one hundred degrees Celsius at sea level, and it freezes at",
]


def test_latent_thoughts_have_the_norm_of_real_token_inputs(gemma3):
    """Gemma multiplies embeddings by sqrt(D) inside its embedding module: thoughts must match what the
    module produces for real tokens (~26), not the raw weight rows (~1)."""
    m = gemma3
    emb = m.model.get_input_embeddings()
    enc = m.encode(TEXTS, add_special_tokens=True)
    real = emb(enc["input_ids"])[enc["attention_mask"].bool()].detach()
    thoughts, _ = m.think(m.prefill(**enc), 3)
    token_norm = float(real.norm(dim=-1).mean())
    raw_norm = float(emb.weight.detach().norm(dim=-1).mean())
    assert token_norm > 10 * raw_norm  # the scale really is inside the module
    assert abs(float(thoughts.norm(dim=-1).mean()) - token_norm) < 0.1 * token_norm


def test_generate_equals_transformers_generate_greedy(gemma3):
    m = gemma3
    enc = m.encode(TEXTS[:1], add_special_tokens=True)
    assert int(enc["input_ids"][0, 0]) == m.tokenizer.bos_token_id
    ours = m.generate(**enc, max_new_tokens=8, eos_token_id=-5)
    ref = m.model.generate(**enc, max_new_tokens=8, do_sample=False, pad_token_id=m.tokenizer.pad_token_id)
    assert ours.tokens[0].tolist() == ref[0, enc["input_ids"].shape[1] :].tolist()
    assert "France" in ours.texts[0]  # " the capital of the country of France." (a base model)


def test_batch_one_equals_batch_n_across_the_sliding_window(gemma3):
    """Rows alone == rows in a padded batch, with pads inside the window (a padded suffix after a
    state). The window is shortened to 8 positions here so the 270M model crosses it cheaply."""
    from latent import LatentModel

    hf = gemma3.model
    old = hf.config.sliding_window
    hf.config.sliding_window = 8
    try:
        m = LatentModel(hf, gemma3.tokenizer)
        suffixes = [" and so the answer is", " Answer:"]
        st = m.prefill(**m.encode(TEXTS, add_special_tokens=True))
        th, st = m.think(st, 3)
        g = m.generate(**m.encode(suffixes), state=st, max_new_tokens=6, eos_token_id=-5)
        for i, text in enumerate(TEXTS):
            s1 = m.prefill(**m.encode([text], add_special_tokens=True))
            t1, s1 = m.think(s1, 3)
            g1 = m.generate(**m.encode([suffixes[i]]), state=s1, max_new_tokens=6, eos_token_id=-5)
            torch.testing.assert_close(t1[0], th[i], rtol=2e-3, atol=2e-3)
            assert g1.tokens[0].tolist() == g.tokens[i].tolist()
            # and the row alone == HF's own sliding-window forward over the same inputs
            ids = m.encode([text], add_special_tokens=True)["input_ids"]
            suf = m.encode([suffixes[i]])["input_ids"]
            embeds = torch.cat([m.embed(ids), t1, m.embed(suf)], dim=1)
            with torch.no_grad():
                first = hf(inputs_embeds=embeds).logits[0, -1].argmax()
            assert int(first) == int(g1.tokens[0, 0])
            assert embeds.shape[1] > 8  # the window was crossed
    finally:
        hf.config.sliding_window = old


def test_capture_equals_output_hidden_states(gemma3):
    m = gemma3
    enc = m.encode(TEXTS, add_special_tokens=True)
    pos = (enc["attention_mask"].cumsum(1) - 1).clamp_min(0)
    with m.capture(layers=[0, 5, 12]) as acts, torch.no_grad():
        ref = m.model(**enc, position_ids=pos, output_hidden_states=True).hidden_states
    real = enc["attention_mask"].bool()
    for layer in (0, 5, 12):
        torch.testing.assert_close(acts.stacked(layer)[real], ref[layer + 1][real], rtol=1e-3, atol=1e-3)
