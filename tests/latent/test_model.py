"""LatentModel: prefill / think / generate invariants on tiny Llama, Qwen2, Mistral, GPT-2 and Gemma 3 models."""

import pytest
import torch

from latent.testing import ARCHS

PROMPTS = ["Tom has 23 apples.", "Mia had 12 pencils and gave 5 to Leo. Then she found"]


def _positions(mask):
    return (mask.cumsum(1) - 1).clamp_min(0)


@pytest.mark.parametrize("arch", ARCHS)
def test_prefill_last_hidden_is_hidden_states_minus_one(tiny_models, arch):
    """The state's last hidden equals `output_hidden_states[-1]` at the last real token."""
    m = tiny_models[arch]
    enc = m.encode(PROMPTS)
    st = m.prefill(**enc)
    ref = m.model(**enc, position_ids=_positions(enc["attention_mask"]), output_hidden_states=True)
    torch.testing.assert_close(st.last_hidden, ref.hidden_states[-1][:, -1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_latent_steps_equal_feeding_realigned_vectors_as_inputs_embeds(tiny_models, arch):
    """k latent steps == one plain forward over [prompt embeddings, realigned thoughts]."""
    m = tiny_models[arch]
    enc = m.encode(PROMPTS[:1])
    st = m.prefill(**enc)
    thoughts, st2, hidden = m.think(st, steps=4, return_hidden=True)
    assert thoughts.shape == (1, 4, m.hidden_size)
    embeds = torch.cat([m.embed(enc["input_ids"]), thoughts], dim=1)
    ref = m.model(inputs_embeds=embeds, output_hidden_states=True).hidden_states[-1]  # (1, T + 4, D)
    t = enc["input_ids"].shape[1]
    torch.testing.assert_close(hidden, ref[:, t - 1 : t + 3], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(st2.last_hidden, ref[:, -1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(thoughts, m.aligner(hidden), rtol=1e-5, atol=1e-6)
    assert st.length == t and st2.length == t + 4  # the input state is left unchanged


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
def test_batch_one_equals_batch_n(tiny_models, arch):
    """Thoughts and greedy text are the same for each row alone and inside a left-padded batch."""
    m = tiny_models[arch]
    suffixes = ["The answer is", "So"]
    st = m.prefill(**m.encode(PROMPTS))
    th, st = m.think(st, 3)
    g = m.generate(**m.encode(suffixes), state=st, max_new_tokens=6)
    for i, p in enumerate(PROMPTS):
        s1 = m.prefill(**m.encode([p]))
        t1, s1 = m.think(s1, 3)
        g1 = m.generate(**m.encode([suffixes[i]]), state=s1, max_new_tokens=6)
        torch.testing.assert_close(t1[0], th[i], rtol=1e-4, atol=1e-5)
        n = int(g1.lengths[0])
        assert g1.tokens[0, :n].tolist() == g.tokens[i, :n].tolist()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_generate_without_state_matches_transformers_generate(tiny_models, arch):
    """Greedy decoding from a prompt equals HF `generate` (same tokens)."""
    m = tiny_models[arch]
    enc = m.encode(PROMPTS[:1])
    ours = m.generate(**enc, max_new_tokens=8, eos_token_id=-5)  # no eos: decode all 8
    ref = m.model.generate(**enc, max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert ours.tokens[0].tolist() == ref[0, enc["input_ids"].shape[1] :].tolist()


def test_seeded_sampling_is_reproducible(llama):
    """Sampling with the same generator seed gives the same tokens."""
    enc = llama.encode(PROMPTS)
    a = llama.generate(
        **enc,
        max_new_tokens=6,
        do_sample=True,
        top_k=20,
        top_p=0.9,
        generator=torch.Generator().manual_seed(3),
    )
    b = llama.generate(
        **enc,
        max_new_tokens=6,
        do_sample=True,
        top_k=20,
        top_p=0.9,
        generator=torch.Generator().manual_seed(3),
    )
    assert a.tokens.tolist() == b.tokens.tolist()


def test_zero_steps_is_a_no_op(llama):
    """think(steps=0) returns no thoughts and an equivalent state."""
    st = llama.prefill(**llama.encode(PROMPTS))
    th, st2 = llama.think(st, 0)
    assert th.shape == (2, 0, llama.hidden_size) and st2.length == st.length


def test_peft_wrapped_model_thinks_and_loads_from_adapter_dir(tmp_path):
    """A LoRA-wrapped model works through the same interface, in memory and from a saved adapter."""
    from peft import LoraConfig, get_peft_model

    from latent import LatentModel, load_model
    from latent.testing import tiny_model

    base = tiny_model("llama", tmp_path / "base")
    peft_model = get_peft_model(base.model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    pm = LatentModel(peft_model, base.tokenizer)
    th, _ = pm.think(pm.prefill(**pm.encode(PROMPTS)), 2)
    assert th.shape == (2, 2, pm.hidden_size) and torch.isfinite(th).all()
    peft_model.save_pretrained(tmp_path / "adapter")
    base.tokenizer.save_pretrained(tmp_path / "adapter")
    loaded = load_model(str(tmp_path / "adapter"), device="cpu")
    th2, _ = loaded.think(loaded.prefill(**loaded.encode(PROMPTS)), 2)
    torch.testing.assert_close(th2, th, rtol=1e-4, atol=1e-5)


def test_bf16_model_thinks_and_generates(tmp_path):
    """A bf16 load keeps bf16 thoughts and decodes; realignment is still computed in fp32."""
    from latent import load_model
    from latent.testing import tiny_model

    tiny_model("qwen2", tmp_path)
    m = load_model(str(tmp_path), dtype="bfloat16", device="cpu")
    st = m.prefill(**m.encode(PROMPTS))
    th, st = m.think(st, 2)
    assert th.dtype == torch.bfloat16 and torch.isfinite(th.float()).all()
    assert m.aligner.matrix.dtype == torch.float32
    out = m.generate(**m.encode(["So"] * 2), state=st, max_new_tokens=3)
    assert out.tokens.shape[0] == 2


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_prefill_in_place_extends_the_given_state_and_matches_a_copy(tiny_models, arch):
    """`in_place=True` skips the copy of the state it is handed; the default leaves that state unchanged."""
    m = tiny_models[arch]
    st = m.prefill(**m.encode(PROMPTS))
    t = st.length
    more = m.encode(["and then", "so"])
    ref = m.prefill(**more, state=st)
    assert st.length == t and st.cache.get_seq_length() == t  # the default copied
    out = m.prefill(**more, state=st, in_place=True)
    assert out.cache is st.cache and st.cache.get_seq_length() == ref.length
    torch.testing.assert_close(out.last_hidden, ref.last_hidden, rtol=1e-5, atol=1e-6)
    for got, want in zip(out.cache.layers, ref.cache.layers, strict=True):
        torch.testing.assert_close(got.keys, want.keys)
        torch.testing.assert_close(got.values, want.values)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_think_and_generate_in_place_match_a_copy(tiny_models, arch):
    """`in_place=True` extends the state it is handed (no copy) and gives what the copying default gives."""
    m = tiny_models[arch]
    st = m.prefill(**m.encode(PROMPTS))
    t = st.length
    ref_th, ref_st = m.think(st, 3)
    assert st.cache.get_seq_length() == t  # the default copied
    th, out = m.think(st, 3, in_place=True)
    assert out.cache is st.cache and st.cache.get_seq_length() == t + 3
    torch.testing.assert_close(th, ref_th)
    torch.testing.assert_close(out.last_hidden, ref_st.last_hidden)
    ref = m.generate(state=out, max_new_tokens=5)
    assert out.cache.get_seq_length() == t + 3
    got = m.generate(state=out, max_new_tokens=5, in_place=True)
    assert got.texts == ref.texts and torch.equal(got.tokens, ref.tokens)


def test_select_rows_keeps_each_rows_state(llama):
    st = llama.prefill(**llama.encode(PROMPTS + ["A third one"]))
    sub = st.select_rows(torch.tensor([2, 0]))
    sub.check()
    assert sub.batch_size == 2 and st.batch_size == 3
    for new, old in ((0, 2), (1, 0)):
        assert torch.equal(sub.attention_mask[new], st.attention_mask[old])
        assert torch.equal(sub.next_position[new], st.next_position[old])
        for a, b in zip(sub.cache.layers, st.cache.layers, strict=True):
            assert torch.equal(a.keys[new], b.keys[old]) and torch.equal(a.values[new], b.values[old])
    whole = llama.generate(state=st, max_new_tokens=4, return_state=True)  # return_state: no row dropped
    assert llama.generate(state=sub, max_new_tokens=4).texts == [whole.texts[2], whole.texts[0]]
    # with room to grow: the rows' own buffers (appending leaves `st` alone), same decoded text
    before = [layer.keys.clone() for layer in st.cache.layers]
    roomy = st.select_rows(torch.tensor([2, 0]), room=4)
    assert all(
        layer._kbuf.shape[-2] >= min(st.length + 4, b._kbuf.shape[-2])
        for layer, b in zip(roomy.cache.layers, st.cache.layers, strict=True)
    )
    grown = llama.generate(state=roomy, max_new_tokens=4, in_place=True)
    assert grown.texts == [whole.texts[2], whole.texts[0]]
    assert all(torch.equal(layer.keys, k) for layer, k in zip(st.cache.layers, before, strict=True))


def test_generate_drops_finished_rows_without_changing_any_text(llama, monkeypatch):
    """Rows that end early leave the decoding batch (their cache is no longer read each step); every row's
    tokens, lengths and text equal decoding with the whole batch to the end."""
    import latent.model as lm

    enc = llama.encode([*PROMPTS, "Sam counts 4 birds and", "Nine minus two is"])
    first = llama.generate(**enc, max_new_tokens=1).tokens[:, 0]
    eos = int(first[0])  # row 0 ends at once; the others (all different) go on
    assert int((first == eos).sum()) < len(first)
    from latent.state import LatentState

    calls = []
    real = LatentState.select_rows

    def spy(self, rows, room=0):
        calls.append(len(rows))
        return real(self, rows, room)

    monkeypatch.setattr(LatentState, "select_rows", spy)
    dropped = llama.generate(**enc, max_new_tokens=12, eos_token_id=eos)
    assert calls, "no finished row was dropped"
    monkeypatch.setattr(lm, "_worth_dropping", lambda alive, rows: False)
    full = llama.generate(**enc, max_new_tokens=12, eos_token_id=eos)
    assert dropped.texts == full.texts
    assert torch.equal(dropped.tokens, full.tokens) and torch.equal(dropped.lengths, full.lengths)


def test_weight_bytes_counts_the_decoder_layers_and_the_lm_head(llama):
    # tiny llama: D 64, MLP 128, 4 heads, 2 KV heads of 16 -> q, o 64x64; k, v 64x32; gate, up, down 64x128;
    # two RMSNorm weights of 64; two layers; float32
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    w = llama.weight_bytes()
    assert w["layers"] == 2 * per_layer * 4
    assert w["lm_head"] == llama.config.vocab_size * 64 * 4
