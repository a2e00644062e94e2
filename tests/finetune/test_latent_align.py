"""Latent-aware fine-tuning: gradients through `think`, the trainable aligner, the training loop, and the
fact hand-off task's agreement with `agents.run`."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import yaml

import agents
from finetune import fact_handoff as fh
from finetune import latent_align as la
from latent import LatentModel, load_model
from latent.realign import RandomThoughts, TrainableAligner
from latent.testing import tiny_model

STEPS = 3


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-latent-align")
    tiny_model("llama", d)
    return d


def _batch(lm: LatentModel, n=4, seed=3):
    rows = [dataclasses.asdict(p) for p in fh.make_problems(n, seed)]
    return la.HandoffCollator(lm)(rows)


def test_think_with_grad_gives_the_same_thoughts_as_think(tiny_dir):
    m = load_model(str(tiny_dir), device="cpu")
    st = m.prefill(**m.encode(["What is Ann's locker code?", "Hi"], chat=True))
    a, st_a = m.think(st, STEPS)
    b, st_b = m.think_with_grad(st, STEPS)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(st_a.last_hidden, st_b.last_hidden)
    assert st.length == st_a.length - STEPS  # the input state is left unchanged by both


def test_no_grad_think_carries_no_gradient_with_a_trainable_aligner(tiny_dir):
    m = load_model(str(tiny_dir), device="cpu")
    al = TrainableAligner.from_model(m)
    st = m.prefill(**m.encode(["Hi"], chat=True))
    thoughts, _ = m.think(st, STEPS, aligner=al)
    assert not thoughts.requires_grad
    thoughts, _ = m.think_with_grad(st, STEPS, aligner=al)
    assert thoughts.requires_grad


def test_trainable_aligner_starts_at_the_ridge_map(tiny_dir):
    m = load_model(str(tiny_dir), device="cpu")
    h = torch.randn(5, m.hidden_size)
    for kind in ("linear", "mlp"):
        al = TrainableAligner.from_model(m, kind=kind, mlp_hidden=16)
        torch.testing.assert_close(al(h), m.aligner(h), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-gpt2-latent-align")
    tiny_model("gpt2", d)
    return d


def _double_setup(model_dir):
    """A float64 tiny model with a LoRA whose B is non-zero and a linear aligner, for finite differences.
    GPT-2 because its LayerNorm stays in float64 (Llama-style RMSNorm computes in float32, whose rounding
    would swamp a 1e-6 step)."""
    from peft import LoraConfig, get_peft_model

    base = load_model(str(model_dir), device="cpu")
    base.model.double()
    al = TrainableAligner.from_model(base).double()
    for p in base.model.parameters():
        p.requires_grad_(False)
    torch.manual_seed(0)
    net = get_peft_model(base.model, LoraConfig(r=2, target_modules=["c_attn"], init_lora_weights=False))
    net.double()
    from latent.model import LatentModel

    lm = LatentModel(net, base.tokenizer, realign=al)
    return la.LatentHandoffModel(lm, STEPS), _batch(lm)


def _directional_check(module, batch, param: torch.nn.Parameter, eps: float = 1e-6) -> tuple[float, float]:
    module.zero_grad()
    module(**batch)["loss"].backward()
    v = torch.randn_like(param)
    analytic = float((param.grad * v).sum())
    with torch.no_grad():
        param.add_(eps * v)
        up = float(module(**batch)["loss"])
        param.sub_(2 * eps * v)
        down = float(module(**batch)["loss"])
        param.add_(eps * v)
    return analytic, (up - down) / (2 * eps)


def test_gradients_flow_through_think_into_aligner_and_lora(gpt2_dir):
    """Finite differences agree with autograd for the aligner (used only inside `think`) and a LoRA
    weight: the gradient path through the latent thoughts is complete and exact (float64)."""
    module, batch = _double_setup(gpt2_dir)
    module.eval()
    lora_b = next(p for n, p in module.net.named_parameters() if "lora_B" in n)
    for param in (module.aligner.linear.weight, module.aligner.log_scale, lora_b):
        analytic, numeric = _directional_check(module, batch, param)
        assert abs(analytic) > 1e-8, "no gradient reached this parameter"
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-9)


def test_trained_aligner_saved_and_reloaded_gives_identical_thoughts(tiny_dir, tmp_path):
    m = load_model(str(tiny_dir), device="cpu")
    al = TrainableAligner.from_model(m, kind="mlp", mlp_hidden=8)
    with torch.no_grad():  # stand-in for training: move every weight off its initial value
        for p in al.parameters():
            p.add_(0.01 * torch.randn_like(p))
    path = tmp_path / "aligner.safetensors"
    al.save(path)
    m2 = load_model(str(tiny_dir), device="cpu", realign=str(path))
    st = m.prefill(**m.encode(["What is Ann's locker code?"], chat=True))
    a, _ = m.think(st, STEPS, aligner=al)
    b, _ = m2.think(st, STEPS)
    assert torch.equal(a, b)
    ridge, _ = m.think(st, STEPS)
    assert not torch.equal(a, ridge)  # the trained map is the one in use, not the default ridge


def test_aligner_file_errors_are_clear(tiny_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="no aligner file"):
        load_model(str(tiny_dir), device="cpu", realign=str(tmp_path / "missing.safetensors"))
    from safetensors.torch import save_file

    bad = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(2)}, str(bad))
    with pytest.raises(ValueError, match="not a latentworks aligner"):
        load_model(str(tiny_dir), device="cpu", realign=str(bad))


def test_training_on_a_tiny_model_lowers_the_latent_mas_loss(tiny_dir, tmp_path):
    cfg = la.LatentAlignConfig(
        model=str(tiny_dir), out_dir=str(tmp_path), latent_steps=STEPS, train_n=64, max_steps=15,
        batch_size=8, lr=3e-3, aligner_lr=1e-3, warmup_steps=2, logging_steps=5, eval_n=0,
    )  # fmt: skip
    lm = la.prepare(cfg, load_model(str(tiny_dir), device="cpu"))
    collator = la.HandoffCollator(lm)
    probe = fh.make_problems(16, 77)
    before = la.handoff_loss(la.LatentHandoffModel(lm, STEPS), collator, probe)
    module, log = la.train(cfg, lm)
    after = la.handoff_loss(module, collator, probe)
    assert log and log[-1]["step"] == 15
    assert after < before - 0.1, (before, after)
    la.save(cfg, module, tmp_path)
    reloaded = load_model(
        str(tmp_path / "adapter"), device="cpu", realign=str(tmp_path / "aligner.safetensors")
    )
    st = lm.prefill(**lm.encode(["What is Ann's locker code?"], chat=True))
    torch.testing.assert_close(reloaded.think(st, STEPS)[0], lm.think(st, STEPS)[0])


def test_config_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="nothing to train"):
        la.LatentAlignConfig(lora=False, aligner="none")
    with pytest.raises(ValueError, match="`aligner` must be one of"):
        la.LatentAlignConfig(aligner="conv")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("latent_stepz: 3\n")
    with pytest.raises(ValueError, match="unknown key `latent_stepz`"):
        la.load_config(recipe)


def test_shipped_recipe_loads():
    cfg = la.load_config("finetune/recipes/smollm2-latent-fact.yaml")
    assert cfg.model == "smollm2-135m-instruct" and cfg.lora


@pytest.mark.parametrize("method", ["latent_mas", "text_mas", "single"])
def test_fact_handoff_matches_agents_run_on_the_graph(tiny_dir, tmp_path, method):
    """The task's hand-offs are what `agents.run` does on a reader -> answerer graph with a latent edge."""
    m = load_model(str(tiny_dir), device="cpu")
    p = fh.make_problems(1, 5)[0]
    ps = fh.prompt_set(p)
    spec = {
        "system": ps.system, "user": ps.user, "user_with_context": ps.user_with_context,
        "context_item": ps.context_item, "context_separator": ps.context_separator,
    }  # fmt: skip
    (tmp_path / "prompts.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "graph.yaml").write_text(yaml.safe_dump(fh.GRAPH_SPEC))
    ref = agents.run(
        str(tmp_path / "graph.yaml"), m, [p.question], method=method, latent_steps=STEPS,
        max_new_tokens=5, prompts=str(tmp_path / "prompts.yaml"),
    )[0].text  # fmt: skip
    mine = fh.run_handoff(m, [p], method, steps=STEPS, max_new_tokens=5, reader_tokens=5)[0]
    assert mine == ref


def test_ablations_keep_norms_and_swap_questions(tiny_dir):
    m = load_model(str(tiny_dir), device="cpu")
    probs = fh.make_problems(4, 11)
    mem_real, _, lid_real = fh.reader_memory(m, probs, STEPS)
    rand = RandomThoughts(m.aligner, seed=0)
    mem_rand, _, lid_rand = fh.reader_memory(m, probs, STEPS, aligner=rand)
    real_t, rand_t = mem_real.segments[lid_real].embeds, mem_rand.segments[lid_rand].embeds
    torch.testing.assert_close(real_t[:, 0].norm(dim=-1), rand_t[:, 0].norm(dim=-1))
    assert not torch.allclose(real_t, rand_t)
    perm = fh.derangement(4, seed=1)
    assert sorted(perm.tolist()) == [0, 1, 2, 3] and all(perm[i] != i for i in range(4))
    st, _ = fh.answerer_state(m, probs, "latent_mas", STEPS)
    swapped = fh.permute_rows(m, st, perm)
    torch.testing.assert_close(swapped.last_hidden, st.last_hidden[perm])
    with pytest.raises(ValueError, match="unknown hand-off"):
        fh.run_handoff(m, probs, "telepathy")


def test_extract_answer():
    assert fh.extract_answer("The code is 47.") == 47
    assert fh.extract_answer("no number") is None
