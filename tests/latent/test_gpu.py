"""The CPU invariants on a CUDA device: reference equality (latent steps vs one plain forward, greedy
decoding vs transformers' `generate`) and batch invariance, run by the CPU tests' own bodies on models
loaded on the GPU; plus what only a GPU shows (host synchronisations, sampling on the device, a model
spread over two devices). Skipped where torch sees no CUDA device; `bench/gpu/check.sh` runs them."""

import pytest
import torch

from latent.loading import load_model
from latent.testing import ARCHS
from tests.latent import test_model as cpu

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device: torch.cuda.is_available() is False here"
    ),
]


@pytest.fixture(scope="module")
def cuda_models(tiny_models):
    """The session's tiny models, loaded again from their folders onto cuda:0 (float32, eager attention)."""
    return {
        arch: load_model(m.model.name_or_path, device="cuda", attn_implementation="eager")
        for arch, m in tiny_models.items()
    }


@pytest.mark.parametrize("arch", ARCHS)
def test_latent_steps_equal_one_plain_forward_on_cuda(cuda_models, arch):
    """k latent steps == one forward over [prompt embeddings, realigned thoughts], on the GPU."""
    cpu.test_latent_steps_equal_feeding_realigned_vectors_as_inputs_embeds(cuda_models, arch)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
def test_batch_one_equals_batch_n_on_cuda(cuda_models, arch):
    """Each row alone and inside a left-padded batch give the same thoughts and greedy text, on the GPU."""
    cpu.test_batch_one_equals_batch_n(cuda_models, arch)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_generate_matches_transformers_generate_on_cuda(cuda_models, arch):
    """Greedy decoding from a prompt equals transformers' `generate`, on the GPU."""
    cpu.test_generate_without_state_matches_transformers_generate(cuda_models, arch)


def test_thoughts_on_cuda_match_the_cpu(tiny_models, cuda_models):
    """The same model's thoughts on the GPU and on the CPU agree to float32 rounding (TF32 off)."""
    cpu_m, gpu_m = tiny_models["qwen2"], cuda_models["qwen2"]
    th_cpu, _ = cpu_m.think(cpu_m.prefill(**cpu_m.encode(cpu.PROMPTS)), 4)
    th_gpu, _ = gpu_m.think(gpu_m.prefill(**gpu_m.encode(cpu.PROMPTS)), 4)
    torch.testing.assert_close(th_gpu.cpu(), th_cpu, rtol=1e-4, atol=1e-5)


def test_latent_loop_does_not_synchronise_per_step(cuda_models):
    """Latent steps wait for the device once (the context bound), whatever their number."""
    m = cuda_models["llama"]
    st = m.prefill(**m.encode(cpu.PROMPTS))
    torch.cuda.synchronize()
    counts = []
    for steps in (2, 12):
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with pytest.warns(UserWarning) as record:
                m.think(st, steps)
                torch.cuda.synchronize()  # one of our own, so `warns` always has something to record
        finally:
            torch.cuda.set_sync_debug_mode("default")
        counts.append(sum("synchroniz" in str(w.message) for w in record))
    assert counts[0] == counts[1], counts


def test_sampling_draws_on_the_gpu(cuda_models, monkeypatch):
    """With a CUDA generator, sampling draws from the probabilities where they are: no B x V copy."""
    m = cuda_models["llama"]
    seen = []
    real = torch.multinomial
    monkeypatch.setattr(torch, "multinomial", lambda p, *a, **k: seen.append(p.device) or real(p, *a, **k))
    g = torch.Generator("cuda").manual_seed(0)
    m.generate(**m.encode(cpu.PROMPTS), max_new_tokens=4, do_sample=True, generator=g)
    assert seen and all(d.type == "cuda" for d in seen)


def test_model_spread_over_gpu_and_cpu_decodes(tiny_models):
    """A `device_map` with the embedding on the GPU and the head on the CPU (two devices on a one-GPU
    machine) thinks and decodes: tokens are moved from the head's device to the embedding's."""
    m = tiny_models["llama"]
    split = {
        "model.embed_tokens": 0,
        "model.layers": 0,
        "model.norm": "cpu",
        "model.rotary_emb": 0,
        "lm_head": "cpu",
    }
    spread = load_model(m.model.name_or_path, device_map=split, attn_implementation="eager")
    assert spread.device.type == "cuda" and spread.model.lm_head.weight.device.type == "cpu"
    st = spread.prefill(**spread.encode(cpu.PROMPTS))
    th, st = spread.think(st, 3)
    out = spread.generate(**spread.encode(["So", "The answer is"]), state=st, max_new_tokens=6)
    ref_st = m.prefill(**m.encode(cpu.PROMPTS))
    ref_th, _ = m.think(ref_st, 3)
    torch.testing.assert_close(th.cpu(), ref_th, rtol=1e-4, atol=1e-5)
    assert out.tokens.device == spread.device and out.tokens.shape[0] == 2
