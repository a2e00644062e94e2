"""The `wordings` option of the thought-channel trainer: `varied` trains on the many-wordings generator
with each item's own notes as holder targets (relevance and working lines included), its training items
recount clean against the test split, and the plain wording stays the default."""

import re

import pytest

from eval.tasks import handoff_wordings as tw
from finetune import thought_channel as tc
from latent import load_model


def _cfg(**kw) -> tc.ThoughtChannelConfig:
    return tc.ThoughtChannelConfig(**{"out_dir": "unused", **kw})


def test_varied_wordings_draw_the_many_wordings_generator_and_plain_stays_the_default():
    """`wordings: varied` gives the varied generator's train split (items with notes); the default the
    plain generator's items, with no notes."""
    assert _cfg().wordings == "plain"
    varied = tc.train_items(_cfg(wordings="varied"), "pick", 3)
    assert varied == tw.make_items("pick", 8, "train", seed=3) and all(it.notes for it in varied)
    assert all(it.notes is None for it in tc.train_items(_cfg(), "pick", 3))


def test_config_rejects_an_unknown_wording_set_and_random_names_with_varied():
    """A typo in `wordings`, and `random_names` (which renames the plain wording's people) with varied
    wordings, are named in one error before anything loads."""
    with pytest.raises(ValueError, match=r"`wordings` must be one of .*`random_names` renames"):
        _cfg(wordings="fancy", random_names=0.5)
    with pytest.raises(ValueError, match="`random_names` renames"):
        _cfg(wordings="varied", random_names=0.5)


def test_holder_notes_and_answer_targets_come_from_the_items_notes():
    """A varied share's note is its item's note (not the share's first word and last number), "-" for the
    pick holder nobody asked about under `relevance`, and a sum's working line adds the notes' numbers."""
    for it in tw.make_items("pick", 40, "train", seed=2):
        assert [tc.item_note(it, i) for i in range(2)] == it.notes
        rel = [tc.item_note(it, i, relevance=True) for i in range(2)]
        assert sorted(n == tc.IRRELEVANT_NOTE for n in rel) == [False, True]
        assert it.answer == next(n for n in rel if n != tc.IRRELEVANT_NOTE).split()[0]
    for it in tw.make_items("sum", 20, "train", seed=2):
        a, b = (n.split()[0] for n in it.notes)
        assert tc.answer_target(it, True) == f"{a} + {b} = {it.answer}.\n\\boxed{{{it.answer}}}"


def test_heldout_recount_is_clean_for_varied_wordings_and_catches_a_test_name(monkeypatch):
    """The card's recount over a varied run finds no test-split value or name; an item with a test-split
    made-up name is counted."""
    cfg = _cfg(wordings="varied", max_steps=30, levels=["relay", "pick", "sum"])
    checks = tc.heldout_checks(cfg)
    assert (
        checks["handoff_train_items"] == 240 and checks["handoff_train_items_with_a_test_value_or_name"] == 0
    )
    (leak,) = tw.make_items("relay", 1, "test", seed=0)
    monkeypatch.setattr(tc, "train_items", lambda cfg, level, step: [leak])
    assert tc.heldout_checks(cfg)["handoff_train_items_with_a_test_value_or_name"] == 30


def test_training_on_varied_wordings_trains_holders_on_the_notes(llama, monkeypatch):
    """Two text steps on the tiny model: holder targets are "<number> <made-up name>" notes of varied
    shares, answer targets boxes; a latent step runs (its thought-note targets from the notes)."""
    seen: list[str] = []
    real = tc.sft_loss
    tok = load_model(llama.model.name_or_path).tokenizer

    def sft(lm, seqs, state=None):
        seen.extend(tok.decode([t for t, y in zip(ids, labels) if y != tc.IGNORE]) for ids, labels in seqs)
        return real(lm, seqs, state)

    monkeypatch.setattr(tc, "sft_loss", sft)
    common = dict(base=llama.model.name_or_path, wordings="varied", batch_size=4, latent_steps=2)
    common |= dict(latent_curriculum=[2], oracle_frac=0.0, logging_steps=1, levels=["pick"], seed=1)
    _, log, _ = tc.train(
        _cfg(**common, max_steps=2, text_until=1.0, text_floor=1.0), load_model(common["base"])
    )
    notes = [t.removesuffix("<|im_end|>") for t in seen if "boxed" not in t]  # the tiny chat template's eos
    assert notes and all(re.fullmatch(r"\d\d [A-Z][a-z]+", t) for t in notes)
    assert all(tw.could_be_drawn(t.split()[1]) for t in notes)
    # step 0 is always text; step 1 is latent once text batches have fallen to the floor (0)
    _, log, _ = tc.train(
        _cfg(**common, max_steps=2, text_until=1e-6, text_floor=0.0), load_model(common["base"])
    )
    assert any("loss_latent" in e for e in log), log


def test_the_wordings_recipe_is_the_smollm2_recipe_on_varied_wordings():
    """finetune/recipes/smollm2-135m-instruct-handoff-wordings.yaml opens with its command and differs from
    the SmolLM2 hand-off recipe only in its name (and so its run folder) and `wordings: varied`."""
    import argparse
    import dataclasses
    from pathlib import Path

    recipes = Path(tc.__file__).parent / "recipes"
    new = recipes / "smollm2-135m-instruct-handoff-wordings.yaml"
    assert (
        new.read_text().splitlines()[0] == f"# latentworks finetune mas --config finetune/recipes/{new.name}"
    )
    (old_cfg,) = tc.stage_configs(
        argparse.Namespace(config=str(recipes / "smollm2-135m-instruct-handoff.yaml"))
    )
    (new_cfg,) = tc.stage_configs(argparse.Namespace(config=str(new)))
    old, changed = dataclasses.asdict(old_cfg), dataclasses.asdict(new_cfg)
    assert {k for k in old if old[k] != changed[k]} == {"name", "out_dir", "wordings"}
    assert new_cfg.wordings == "varied" and new_cfg.name == new.stem
