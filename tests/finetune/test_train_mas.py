"""Multi-agent fine-tuning (`finetune/train_mas.py`): the training path is the inference path, with gradients."""

from __future__ import annotations

import pytest
import torch

import agents
from agents import Graph, RunConfig, final_agent_view
from finetune.train_mas import MasCollator, MasTrainConfig, mas_loss, train
from latent.kv_cache import layer_tensors
from latent.memory import WorkingMemory

QUESTIONS = ["Tom has 3 apples and buys 4 more. How many apples?", "Ann has 9 pens and loses 2. How many?"]


@pytest.mark.parametrize("prompts", ["default", "compact"])
@pytest.mark.parametrize("graph", ["sequential", "hierarchical", Graph.hierarchical("latent")])
def test_final_agent_view_is_what_run_decodes_after(llama, graph, prompts):
    """The final agent's view plus its prompt, decoded greedily, gives exactly `agents.run`'s latent_mas text."""
    cfg = RunConfig(method="latent_mas", latent_steps=3, max_new_tokens=6, threads=None, prompts=prompts)
    results = agents.run(graph, llama, QUESTIONS, config=cfg)
    expected = [r.text for r in results]
    msgs, state = final_agent_view(graph, llama, QUESTIONS, cfg)
    enc = llama.encode(msgs)
    assert enc["attention_mask"].sum(1).tolist() == [r.agents[-1].prompt_tokens for r in results]
    st = llama.prefill(enc["input_ids"], enc["attention_mask"], state)
    assert llama.generate(state=st, max_new_tokens=6).texts == expected


@pytest.mark.parametrize("graph", ["sequential", "hierarchical", Graph.hierarchical("latent")])
def test_grad_memory_equals_inference_memory_and_carries_gradients(llama, graph):
    cfg = RunConfig(method="latent_mas", latent_steps=2, threads=None)
    _, plain = final_agent_view(graph, llama, QUESTIONS, cfg)
    _, diff = final_agent_view(graph, llama, QUESTIONS, cfg, WorkingMemory(llama, grad=True))
    for (k0, v0), (k1, v1) in zip(layer_tensors(plain.cache), layer_tensors(diff.cache), strict=True):
        assert torch.allclose(k0, k1, atol=1e-5) and torch.allclose(v0, v1, atol=1e-5)
        assert k1.requires_grad and not k0.requires_grad
    assert torch.equal(plain.attention_mask, diff.attention_mask)


def _config(tmp_path, **kw) -> MasTrainConfig:
    base = dict(out_dir=str(tmp_path), latent_steps=2, latent_curriculum=[1, 2], batch_size=2, eval_n=0)
    return MasTrainConfig(**{**base, **kw})


def test_latent_loss_reaches_every_layer(llama, tmp_path):
    col = MasCollator(_config(tmp_path, latent_frac=1.0), llama.tokenizer)
    batch = col([{"idx": 0}, {"idx": 1}])
    assert batch["graph"] in ("sequential", "hierarchical") and batch["questions"]
    for p in llama.model.parameters():
        p.requires_grad_(True)
    llama.model.zero_grad()
    mas_loss(llama, batch).backward()
    grads = [p.grad for p in llama.model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert all(float(g.abs().sum()) > 0 for g in grads)
    llama.model.zero_grad()
    for p in llama.model.parameters():
        p.requires_grad_(False)


def test_training_lowers_the_latent_mas_loss(tmp_path):
    """A few Trainer steps on latent batches of a tiny model lower its latent_mas loss on held-back ones."""
    from latent.testing import tiny_model

    lm = tiny_model("llama", tmp_path / "m", hidden_size=32)
    cfg = _config(
        tmp_path / "run", latent_frac=1.0, max_steps=30, lr=3e-3, warmup_steps=0, save_steps=1000,
        logging_steps=10, problem_steps=[1], graphs=["sequential"],
    )  # fmt: skip
    col = MasCollator(cfg, lm.tokenizer)
    col.step = cfg.max_steps
    probe = col([{"idx": 10_000}, {"idx": 10_001}])
    with torch.no_grad():
        before = float(mas_loss(lm, probe))
    log, steps = train(cfg, lm)
    with torch.no_grad():
        after = float(mas_loss(lm, probe))
    assert steps == 30 and log
    assert after < 0.8 * before, (before, after)


def test_curriculum_and_validation(tmp_path):
    cfg = _config(
        tmp_path, max_steps=100, latent_steps=8, latent_curriculum=[1, 2, 4, 8], curriculum_frac=0.4
    )
    assert [cfg.thoughts_at(s) for s in (0, 9, 10, 25, 39, 40, 99)] == [1, 1, 2, 4, 8, 8, 8]
    with pytest.raises(ValueError, match="must end at `latent_steps`"):
        _config(tmp_path, latent_steps=4, latent_curriculum=[1, 2])
    with pytest.raises(ValueError, match="`graphs`"):
        _config(tmp_path, graphs=["ring"])
    with pytest.raises(ValueError, match="wrong_draft_frac"):
        _config(tmp_path, wrong_draft_frac=0.9, hint_frac=0.2)
    with pytest.raises(ValueError, match="unknown chat template 'gema'"):
        _config(tmp_path, chat_template="gema")
    assert _config(tmp_path, chat_template="gemma").chat_template == "gemma"


def test_final_agent_view_refuses_other_methods(llama):
    with pytest.raises(ValueError, match="runs latent_mas"):
        final_agent_view("sequential", llama, QUESTIONS, RunConfig(method="text_mas", threads=None))


def test_latent_batches_use_the_prompt_set_they_draw(llama, tmp_path):
    """A compact latent batch gives the final agent no second copy of the question; the loss then runs
    the same prompt set through the memory."""
    cfg = _config(tmp_path, latent_frac=1.0, prompt_sets=["default", "compact"], graphs=["sequential"])
    col = MasCollator(cfg, llama.tokenizer)
    seen = {}
    for i in range(0, 40, 2):
        b = col([{"idx": i}, {"idx": i + 1}])
        text = llama.tokenizer.decode(b["input_ids"][0][b["labels"][0] == -100])
        seen.setdefault(b["prompts"], b["questions"][0].split()[0] in text)
    assert seen == {"default": True, "compact": False}
    with torch.no_grad():
        assert torch.isfinite(mas_loss(llama, b))
    with pytest.raises(ValueError, match="`prompt_sets`"):
        _config(tmp_path, prompt_sets=[])
