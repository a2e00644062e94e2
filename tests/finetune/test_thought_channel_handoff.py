"""The thought-channel trainer (`finetune/thought_channel.py`), hand-off task: gradients reach the LoRA
and the aligner through the thoughts; a saved channel reloads to identical thoughts; the loop applies the
terms it is configured with; arith training items are signature-disjoint from evaluated ones; the options
that are off by default (kv edges, working in the answer, relevance notes, arith without test sums, made-up
names, token thoughts, the embed term) reach the batches."""

import re

import torch

import eval.tasks.arith_data as ad
from eval.tasks import handoff as th
from finetune.thought_channel import (
    IRRELEVANT_NOTE,
    ThoughtChannelConfig,
    answer_target,
    arith_stream,
    holder_note,
    latent_loss,
    latent_state,
    note_targets,
    prepare,
    save_model,
    sft_loss,
    thought_embed_loss,
    token_thought_state,
    train,
    train_items,
)
from latent import load_model
from latent.memory import WorkingMemory


def _cfg(**kw) -> ThoughtChannelConfig:
    return ThoughtChannelConfig(**{"out_dir": "unused", **kw})


def _trainable(llama):
    return prepare(
        _cfg(base=llama.model.name_or_path, lora_r=4, aligner="linear"), load_model(llama.model.name_or_path)
    )


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
        cfg = _cfg(
            base=llama.model.name_or_path, levels=["relay"], max_steps=3, batch_size=2, latent_steps=2,
            latent_curriculum=[2], text_until=1e-6, text_floor=0.0, oracle_frac=0.0, anti_weight=0.0,
            note_weight=note_weight, logging_steps=1,
        )  # fmt: skip
        _, log, _ = train(cfg, load_model(llama.model.name_or_path))
        return log[1:]  # step 1 is a text batch; the rest are latent

    assert all("note" in e for e in run(1.0))
    assert not any("note" in e for e in run(0.0))


_REAL_LOSSES = (sft_loss, latent_loss)


def _train_capturing(llama, monkeypatch, **over):
    """Run `train` on the tiny model for a few steps and record what each batch was trained on: the
    decoded targets of text/oracle batches and the keyword options of latent batches."""
    import finetune.thought_channel as trh

    seen = {"targets": [], "latent": []}
    tok = load_model(llama.model.name_or_path).tokenizer

    def sft(lm, seqs, state=None):
        for ids, labels in seqs:
            seen["targets"].append(tok.decode([t for t, y in zip(ids, labels) if y != trh.IGNORE]))
        return real_sft(lm, seqs, state)

    def latent(lm, items, k, anti_weight, seed, with_random=True, note_weight=0.0, embed_weight=0.0,
               token_thoughts=False, edge="latent", working=False, relevance=False):  # fmt: skip
        kw = dict(edge=edge, working=working, relevance=relevance, token_thoughts=token_thoughts)
        seen["latent"].append(kw)
        return real_latent(lm, items, k, anti_weight, seed, with_random, note_weight, embed_weight, **kw)

    real_sft, real_latent = _REAL_LOSSES  # not the module's: an earlier call's wrappers may still be there
    monkeypatch.setattr(trh, "sft_loss", sft)
    monkeypatch.setattr(trh, "latent_loss", latent)
    base = dict(
        base=llama.model.name_or_path, max_steps=4, batch_size=4, latent_steps=2, latent_curriculum=[2],
        text_floor=0.0, oracle_frac=0.0, anti_weight=0.5, note_weight=1.0, logging_steps=1, seed=1,
    )  # fmt: skip
    cfg = _cfg(**(base | over))
    _, log, _ = train(cfg, load_model(llama.model.name_or_path))
    return seen, log


def test_kv_frac_runs_latent_batches_on_kv_edges(llama, monkeypatch):
    """`kv_frac=1` trains every latent batch on kv edges (the answerer reads the holders' prompts and
    thoughts, as the latent_kv row does); the default keeps thought-only edges."""
    on, log_on = _train_capturing(llama, monkeypatch, levels=["relay"], text_until=1e-6, kv_frac=1.0)
    off, log_off = _train_capturing(llama, monkeypatch, levels=["relay"], text_until=1e-6)
    assert on["latent"] and all(kw["edge"] == "kv" for kw in on["latent"])
    assert any("loss_latent_kv" in e for e in log_on) and not any("loss_latent" in e for e in log_on)
    assert off["latent"] and all(kw["edge"] == "latent" for kw in off["latent"])
    # on kv edges the answerer's state holds each holder's prompt as well as its k thoughts
    lm, _ = _trainable(llama)
    items = th.make_items("pick", 2, "train", seed=2)
    assert latent_state(lm, items, k=3, edge="kv")[1].length > 2 * 3


def test_working_levels_show_the_addition_in_the_answer_targets(llama, monkeypatch):
    """With `working_levels=["sum"]` the sum answers are trained as "a + b = s." then the box, in text
    and latent batches alike; without it, the box alone."""
    on, _ = _train_capturing(llama, monkeypatch, levels=["sum"], text_until=1.0, working_levels=["sum"])
    off, _ = _train_capturing(llama, monkeypatch, levels=["sum"], text_until=1.0)
    answers_on = [t for t in on["targets"] if "boxed" in t]
    answers_off = [t for t in off["targets"] if "boxed" in t]
    assert answers_on and all(re.search(r"\d+ \+ \d+ = \d+\.", t) for t in answers_on)
    assert answers_off and not any("+" in t for t in answers_off)
    lat, _ = _train_capturing(llama, monkeypatch, levels=["sum"], text_until=1e-6, working_levels=["sum"])
    assert lat["latent"] and all(kw["working"] for kw in lat["latent"])
    (it,) = th.make_items("sum", 1, "train", seed=3)
    a, b = (re.findall(r"\d+", s)[-1] for s in it.shares)
    assert answer_target(it, True) == f"{a} + {b} = {it.answer}.\n\\boxed{{{it.answer}}}"


def test_relevance_notes_send_a_dash_for_the_share_nobody_asked_about(llama, monkeypatch):
    """With `relevance_notes` a pick holder whose person the question does not name is trained to hand
    on "-" (text and thought-note targets); without it every holder repeats its share."""
    on, _ = _train_capturing(
        llama, monkeypatch, levels=["pick"], text_until=1.0, relevance_notes=True, max_steps=8
    )
    off, _ = _train_capturing(llama, monkeypatch, levels=["pick"], text_until=1.0, max_steps=8)
    holder_targets = [t for t in on["targets"] if "boxed" not in t]
    assert any(t.startswith(IRRELEVANT_NOTE) for t in holder_targets)
    assert not any(t.startswith(IRRELEVANT_NOTE) for t in off["targets"])
    lat, _ = _train_capturing(llama, monkeypatch, levels=["pick"], text_until=1e-6, relevance_notes=True)
    assert lat["latent"] and all(kw["relevance"] for kw in lat["latent"])
    (it,) = th.make_items("pick", 1, "train", seed=4)
    notes = [holder_note(s, it.question, True) for s in it.shares]
    assert sorted(n == IRRELEVANT_NOTE for n in notes) == [False, True] and it.answer in "".join(notes)


def test_arith_skip_test_sums_drops_every_addition_of_two_test_values():
    """`arith_skip_test_sums` keeps no arith problem with a line adding two hand-off test-split sum
    values (the working line of a sum test item); the unfiltered stream has such lines."""
    test = set(th.values("test", 10, 49))

    def adds_test_pair(p):
        return any(op == "+" and a in test and b in test for a, op, b, _ in ad.solution_signature(p))

    cfg = dict(max_steps=200, batch_size=16, arith_frac=0.1)
    kept = arith_stream(_cfg(**cfg, arith_skip_test_sums=True))
    raw = arith_stream(_cfg(**cfg))
    assert len(kept) == len(raw) == 200 * 16
    assert not any(adds_test_pair(p) for p in kept) and any(adds_test_pair(p) for p in raw)


def test_random_names_rename_training_people_and_never_use_a_test_name(llama, monkeypatch):
    """`random_names=1` trains on made-up names (holder notes carry them; one may happen to spell a
    training name, never a test-split name or a near one); the default trains on the generator's items
    unchanged."""
    names_re = re.compile(r"\b(" + "|".join(th.TRAIN_NAMES) + r")\b")
    on, _ = _train_capturing(
        llama, monkeypatch, levels=["relay"], text_until=1.0, random_names=1.0, max_steps=6
    )
    off, _ = _train_capturing(llama, monkeypatch, levels=["relay"], text_until=1.0, max_steps=6)
    notes_on = [t for t in on["targets"] if "boxed" not in t]
    notes_off = [t for t in off["targets"] if "boxed" not in t]
    assert notes_on and sum(bool(names_re.search(t)) for t in notes_on) < len(notes_on) / 4
    assert notes_off and all(names_re.search(t) for t in notes_off)
    cfg = _cfg(random_names=1.0, batch_size=64)
    tests = [n.lower() for n in th.TEST_NAMES]
    items = [it for step in range(20) for it in train_items(cfg, "pick", step)]
    for it in items:
        text = (" ".join(it.shares) + " " + it.question).lower()
        assert not any(t in word or word in t for word in re.findall(r"[a-z]+(?=')", text) for t in tests)
    assert sum(bool(names_re.search(" ".join(it.shares) + it.question)) for it in items) < len(items) / 20
    plain = _cfg(batch_size=8)
    assert train_items(plain, "sum", 5) == th.make_items("sum", 8, "train", seed=5)


def test_the_embed_term_reaches_the_aligner_and_lora_and_changes_the_loss(llama):
    """`embed_weight` adds the thought-embedding term to the latent loss (by exactly its weighted value),
    and the term's own gradient reaches the aligner and, through the thoughts, the LoRA."""
    lm, groups = _trainable(llama)
    items = th.make_items("relay", 3, "train", seed=4)
    off, p_off = latent_loss(lm, items, k=3, anti_weight=0.0, seed=0, note_weight=0.0, embed_weight=0.0)
    on, p_on = latent_loss(lm, items, k=3, anti_weight=0.0, seed=0, note_weight=0.0, embed_weight=2.0)
    assert "embed" in p_on and "embed" not in p_off and p_on["embed"] > 0
    torch.testing.assert_close(float((on - off).detach()), 2.0 * p_on["embed"], rtol=1e-4, atol=1e-5)
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
        cfg = _cfg(
            base=llama.model.name_or_path, levels=["relay"], max_steps=3, batch_size=2, latent_steps=2,
            latent_curriculum=[2], text_until=1e-6, text_floor=0.0, oracle_frac=0.0, anti_weight=0.0,
            token_thought_frac=frac, token_thought_until=1e9, embed_weight=0.5,  # the share never falls
            logging_steps=1,
        )  # fmt: skip
        _, log, _ = train(cfg, load_model(llama.model.name_or_path))
        return [("token_ce" in e, "embed" in e) for e in log[1:]]

    assert kinds(1.0) == [(True, True), (True, True)]
    assert kinds(0.0) == [(False, True), (False, True)]


def test_token_thoughts_and_embed_term_follow_relevance_notes(llama):
    """With `relevance`, the reader warm-up feeds "-" where a pick holder nobody asks about would think,
    and the embed term pulls that holder's first thought toward "-"; the note term asks the same."""
    lm, _ = _trainable(llama)
    items = th.make_items("pick", 4, "train", seed=6)
    k, emb = 3, lm.model.get_input_embeddings()
    (dash,) = lm.tokenizer(IRRELEVANT_NOTE, add_special_tokens=False)["input_ids"]
    for relevance in (True, False):
        mem = WorkingMemory(lm, grad=True)
        token_thought_state(lm, items, k, mem, relevance)
        irrelevant = 0
        for i, seg in enumerate(s for s in mem.segments if s.kind == "latent"):
            for r, it in enumerate(items):
                is_dash = holder_note(it.shares[i], it.question, True) == IRRELEVANT_NOTE
                want = note_targets(lm, items, i, k, relevance)[r, 0]
                assert int(want) == (dash if relevance and is_dash else want)
                torch.testing.assert_close(seg.embeds[r, 0], emb(want).to(seg.embeds.dtype))
                irrelevant += is_dash and int(want) == dash
        assert (irrelevant == len(items)) == relevance  # one holder per pick item has nobody asking
    mem = WorkingMemory(lm, grad=True)
    latent_state(lm, items, k, memory=mem)
    with torch.no_grad():
        assert float(thought_embed_loss(lm, mem, items, True)) != float(thought_embed_loss(lm, mem, items))
