"""The published hand-off recipes keep drawing the same training items, notes and answer targets, and the
generator the same items, whatever wording sets are added: digests computed before the `wordings` option
existed (a changed draw changes a published result's recipe)."""

import argparse
import hashlib
import json
from pathlib import Path

import pytest

from eval.tasks import handoff as th
from finetune import thought_channel as tc

# sha256 of the draws below, computed on the code before `wordings` was added (issue #57)
RECIPE_DIR = Path(__file__).resolve().parents[2] / "finetune" / "recipes"
GENERATOR = "849bf06bbb3f384d8a39079d3435700563967ae36ce1f63874ad6078c1ad2acf"
RECIPES = {
    "arith-mini-v4.yaml": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",  # arith only
    "arith-mini-v5.yaml": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",  # arith only
    "arith-mini-v6.yaml": "0e93529d71cfd79f30d113b292228288a2d8910fc2e003ab5f8f229a671bec22",
    "arith-mini-v7.yaml": "89c6b17a983259998892989bbd32a19a1b214b67918d3bf44b2accad4135d3ee",
    "arith-mini-v8.yaml": "d0bf648fec995cdb8cfcfb75ea6e533223c43f6a37927e7c49bd72d5ed72b24f",
    "gemma-3-270m-handoff.yaml": "2cb37d1d9b8a633c7b55f568099d88dd20c540f6aab63c264b904c198cb759a8",
    "smollm2-135m-instruct-handoff.yaml": "c464266a5854b3f0332512ddd0ab182dadb4202463cd0db8bf81f28387c4a9dc",
}


def _rows(items: list[th.HandoffItem]) -> list:
    return [[it.id, list(it.shares), it.question, it.answer] for it in items]


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()


def test_generator_draws_are_unchanged():
    """Every level (and mixed), both splits, three seeds: the same items as before."""
    draws = [
        _rows(th.make_items(level, 50, split, seed))
        for level in (*th.LEVELS, "mixed")
        for split in th.SPLITS
        for seed in (0, 1, 7)
    ]
    assert _digest(draws) == GENERATOR


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_recipe_training_draws_are_unchanged(recipe):
    """Every 7th step of every stage: the items, the holders' notes and the answer targets as before."""
    out = []
    for cfg in tc.stage_configs(argparse.Namespace(config=str(RECIPE_DIR / recipe))):
        if cfg.task != "handoff":
            continue
        for step in range(0, cfg.stop_at or cfg.max_steps, 7):
            items = tc.train_items(cfg, cfg.levels[step % len(cfg.levels)], step)
            out.append(_rows(items))
            out.append(
                [tc.holder_note(s, it.question, cfg.relevance_notes) for it in items for s in it.shares]
            )
            out.append([tc.answer_target(it, True) for it in items])
    assert _digest(out) == RECIPES[recipe]
