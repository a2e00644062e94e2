"""Latent thoughts on a tiny model of Qwen2.5-Coder's shape family (untied head, 2 KV heads, q/k/v biases)
against an independent loop: plain transformers forward passes over the whole sequence (no KV cache), and
a ridge map solved by least squares on the stacked system instead of the normal equations."""

import pytest
import torch

PROMPTS = [
    "Tom has 23 apples.",
    "Mia had 12 pencils and gave 5 to Leo. Then she found three more in her bag",
    "A farm has 16 cows",
]
STEPS = 6
LAM = 1e-5


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    """A random Qwen2 model with the real models' head layout (14 query heads sharing 2 KV heads) and an
    untied output head, saved and reloaded through `load_model`."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    from latent import load_model
    from latent.testing import _CORPUS, train_chat_tokenizer

    tok = train_chat_tokenizer(_CORPUS * 4, vocab_size=320)
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=112,
        intermediate_size=224,
        num_hidden_layers=3,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    hf = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # random biases (they start at zero) so the test sees Qwen2's q/k/v biases act
        for layer in hf.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    d = tmp_path_factory.mktemp("tiny-qwen2-shape")
    hf.save_pretrained(d)
    tok.save_pretrained(d)
    return load_model(str(d), device="cpu", dtype="float32")


def _ridge_by_lstsq(w_in: torch.Tensor, w_out: torch.Tensor, lam: float) -> torch.Tensor:
    """argmin ||W_out A - W_in||^2 + lam ||A||^2 as one least-squares problem on [W_out; sqrt(lam) I]."""
    d = w_out.shape[1]
    a = torch.cat([w_out.double(), lam**0.5 * torch.eye(d, dtype=torch.float64)])
    b = torch.cat([w_in.double(), torch.zeros((d, d), dtype=torch.float64)])
    return torch.linalg.lstsq(a, b).solution


def _reference_thoughts(m, prompt: str, steps: int) -> torch.Tensor:
    """The thoughts of one unpadded prompt, each step a full forward pass over prompt + earlier thoughts."""
    hf = m.model
    w_in, w_out = hf.get_input_embeddings().weight.detach(), hf.get_output_embeddings().weight.detach()
    a = _ridge_by_lstsq(w_in, w_out, LAM)
    target = w_in.double().norm(dim=-1).mean()
    ids = m.encode([prompt], chat=True)["input_ids"]
    embeds = hf.get_input_embeddings()(ids)
    out = []
    with torch.no_grad():
        for _ in range(steps):
            h = hf(inputs_embeds=embeds, output_hidden_states=True).hidden_states[-1][0, -1].double()
            e = h @ a
            e = (e * target / e.norm()).float()
            out.append(e)
            embeds = torch.cat([embeds, e[None, None]], dim=1)
    return torch.stack(out)


def test_the_untied_head_gives_a_real_ridge_map(qwen):
    """With an untied head the map is a real solve (far from the identity), equal to the least-squares one."""
    hf = qwen.model
    assert hf.get_input_embeddings().weight.data_ptr() != hf.get_output_embeddings().weight.data_ptr()
    ref = _ridge_by_lstsq(hf.get_input_embeddings().weight, hf.get_output_embeddings().weight, LAM)
    matrix = qwen.aligner.matrix.double()
    torch.testing.assert_close(matrix, ref, rtol=1e-4, atol=1e-5)
    eye = torch.eye(matrix.shape[0], dtype=torch.float64)
    assert (matrix - eye).norm() > 0.5 * eye.norm()


def test_batched_left_padded_thoughts_equal_the_independent_loop(qwen):
    """Every row of a left-padded batch thinks what the cache-free reference loop thinks for it alone."""
    thoughts, _ = qwen.think(qwen.prefill(**qwen.encode(PROMPTS, chat=True)), STEPS)
    for i, p in enumerate(PROMPTS):
        torch.testing.assert_close(thoughts[i], _reference_thoughts(qwen, p, STEPS), rtol=1e-4, atol=1e-4)


def test_batch_one_equals_batch_n_and_decodes_the_same(qwen):
    """Thoughts and greedy text after them are the same alone and inside a left-padded batch."""
    st = qwen.prefill(**qwen.encode(PROMPTS, chat=True))
    th, st = qwen.think(st, STEPS)
    g = qwen.generate(**qwen.encode(["So"] * len(PROMPTS)), state=st, max_new_tokens=8, eos_token_id=-5)
    for i, p in enumerate(PROMPTS):
        t1, s1 = qwen.think(qwen.prefill(**qwen.encode([p], chat=True)), STEPS)
        g1 = qwen.generate(**qwen.encode(["So"]), state=s1, max_new_tokens=8, eos_token_id=-5)
        torch.testing.assert_close(t1[0], th[i], rtol=1e-5, atol=1e-5)
        assert g1.tokens[0].tolist() == g.tokens[i].tolist()
