"""Hand-off training: gradients reach the LoRA and the aligner through the thoughts; a saved model
reloads to identical thoughts; the training loop applies the thought-note term it is configured with; arith training items are signature-disjoint from evaluated ones."""

import torch

import eval.arith_data as ad
from eval import tasks_handoff as th
from finetune.train_handoff import (
    HandoffTrainConfig,
    latent_loss,
    latent_state,
    note_targets,
    prepare,
    save_model,
    thought_embed_loss,
    token_thought_state,
    train,
)
from latent import load_model
from latent.memory import WorkingMemory


def _trainable(llama):
    cfg = HandoffTrainConfig(lora=True, lora_r=4, aligner="linear")
    return prepare(cfg, load_model(llama.model.name_or_path))


def test_gradients_reach_lora_and_aligner_through_the_thoughts(llama):
    lm, groups = _trainable(llama)
    items = th.make_items("pick", 3, "train", seed=1)
    loss, parts = latent_loss(lm, items, k=2, anti_weight=0.5, seed=0)
    loss.backward()
    lora = [p for p in groups[0]["params"]]
    assert lora and any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora)
    # the aligner acts only inside the thinking loop: a gradient there went through the thoughts
    al = list(lm.aligner.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in al)
    assert "anti" in parts


def test_the_answerer_reads_only_thoughts(llama):
    """With latent edges the answerer's state holds k thoughts per holder and nothing else."""
    lm, _ = _trainable(llama)
    items = th.make_items("pick", 2, "train", seed=2)
    _, state = latent_state(lm, items, k=3)
    assert state.length == 2 * 3


def test_a_saved_model_reloads_to_identical_thoughts(llama, tmp_path):
    lm, groups = _trainable(llama)
    with torch.no_grad():  # move the LoRA and aligner away from their initial values
        for g in groups:
            for p in g["params"]:
                p.add_(0.01 * torch.randn_like(p))
    save_model(lm, tmp_path / "m")
    again = load_model(str(tmp_path / "m"))
    enc = lm.encode([[{"role": "user", "content": "Ann's code is 47. What is Ann's code?"}]])
    with torch.no_grad():
        a, _ = lm.think(lm.prefill(**enc), 4)
        b, _ = again.think(again.prefill(**enc), 4)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_arith_training_items_are_signature_disjoint_from_evaluated_items():
    banned = ad.eval_signatures()
    train = ad.signature_disjoint_train(2000, seed=0)
    assert len(train) == 2000 and not {ad.solution_signature(p) for p in train} & banned
    # the unfiltered train stream does collide (what the filter is for)
    raw = ad.make_problems(2000, 0, "train", (1, 2, 3, 4))
    assert any(ad.solution_signature(p) in banned for p in raw)


def test_the_training_loop_applies_the_thought_note_term(llama):
    """`note_weight` reaches the latent batches of `train` (their log holds the note loss) and 0 turns
    the term off."""

    def run(note_weight):
        cfg = HandoffTrainConfig(
            levels=["relay"], steps=3, batch_size=2, latent_steps=2, k_schedule=[2], text_until=1e-6,
            text_floor=0.0, oracle_frac=0.0, anti_weight=0.0, note_weight=note_weight, log_every=1,
        )  # fmt: skip
        _, log, _ = train(cfg, load_model(llama.model.name_or_path))
        return log[1:]  # step 1 is a text batch; the rest are latent

    assert all("note" in e for e in run(1.0))
    assert not any("note" in e for e in run(0.0))


def test_the_embed_term_reaches_the_aligner_and_lora_and_changes_the_loss(llama):
    """`embed_weight` adds the thought-embedding term to the latent loss (by exactly its weighted value),
    and the term's own gradient reaches the aligner and, through the thoughts, the LoRA."""
    lm, groups = _trainable(llama)
    items = th.make_items("relay", 3, "train", seed=4)
    off, p_off = latent_loss(lm, items, k=3, anti_weight=0.0, seed=0, note_weight=0.0, embed_weight=0.0)
    on, p_on = latent_loss(lm, items, k=3, anti_weight=0.0, seed=0, note_weight=0.0, embed_weight=2.0)
    assert "embed" in p_on and "embed" not in p_off and p_on["embed"] > 0
    torch.testing.assert_close(float(on - off), 2.0 * p_on["embed"], rtol=1e-4, atol=1e-5)
    mem = WorkingMemory(lm, grad=True)
    latent_state(lm, items, 3, memory=mem)
    thought_embed_loss(lm, mem, items).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.aligner.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in groups[0]["params"])


def test_token_thoughts_feed_the_note_embeddings_and_train_the_reader(llama):
    """Under `token_thoughts` the answerer reads the note tokens' input embeddings where the thoughts go
    (past the note's end, the model's own thoughts), and its answer CE differs from the real thoughts'."""
    lm, groups = _trainable(llama)
    items = th.make_items("pick", 2, "train", seed=5)
    k = 8  # longer than every note here, so the tail falls back to the model's own thoughts
    mem = WorkingMemory(lm, grad=True)
    _, state = token_thought_state(lm, items, k, mem)
    assert state.length == 2 * k
    emb = lm.model.get_input_embeddings()
    for i, seg in enumerate(s for s in mem.segments if s.kind == "latent"):
        target = note_targets(lm, items, i, k)
        known = target != -100
        assert known.any() and (~known).any()
        torch.testing.assert_close(seg.embeds[known], emb(target.clamp(min=0))[known].to(seg.embeds.dtype))
        assert not torch.allclose(seg.embeds[~known], emb(target.clamp(min=0))[~known])
    real, p_real = latent_loss(lm, items, k=k, anti_weight=0.0, seed=0)
    tok, p_tok = latent_loss(lm, items, k=k, anti_weight=0.0, seed=0, note_weight=1.0, token_thoughts=True)
    assert "token_ce" in p_tok and "latent_ce" in p_real and "note" in p_tok
    assert abs(p_tok["token_ce"] - p_real["latent_ce"]) > 1e-4
    tok.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in groups[0]["params"])


def test_the_training_loop_runs_token_thought_batches_when_configured(llama):
    """`token_thought_frac` = 1 makes the early latent batches token-thought batches; 0 keeps none; the
    embed term is applied in both."""

    def kinds(frac):
        cfg = HandoffTrainConfig(
            levels=["relay"], steps=3, batch_size=2, latent_steps=2, k_schedule=[2], text_until=1e-6,
            text_floor=0.0, oracle_frac=0.0, anti_weight=0.0, token_thought_frac=frac,
            token_thought_until=1e9, embed_weight=0.5, log_every=1,  # the share never falls in 3 steps
        )  # fmt: skip
        _, log, _ = train(cfg, load_model(llama.model.name_or_path))
        return [("token_ce" in e, "embed" in e) for e in log[1:]]

    assert kinds(1.0) == [(True, True), (True, True)]
    assert kinds(0.0) == [(False, True), (False, True)]
