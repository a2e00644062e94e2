"""The other-wording hand-off files (bench/data/handoff_wordings_*.jsonl): their counts and fields, answers
that follow from the shares, held-out values and names, no training template in them, and a writer that
shares no code with the training generators and reproduces the committed files."""

import ast
import json
import re
from pathlib import Path

import pytest

from bench.studies import make_handoff_wordings as mw
from eval.tasks import handoff as th
from eval.tasks import handoff_wordings as tw

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
LEVELS = ("relay", "pick", "sum")
# The plain generator's templates (eval/tasks/handoff.py writes them inline); the first test checks that
# they are what it draws, so this list cannot drift from it.
PLAIN = (
    "{name}'s {what} is {num}.",
    "What is {name}'s {what}?",
    "{name} has {num} {what}.",
    "How many {what} do {a} and {b} have together?",
)
TEMPLATES = PLAIN + tuple(t for group in tw.TEMPLATES.values() for t in group)
NUMBER = r"\d+|[a-z]+(?:-[a-z]+)?"


# What the slots can hold: a number (digits or words), a possessive (the generator fills `poss` with
# "X's"), anything else any text.
SLOTS = {"num": f"(?:{NUMBER})", "small": f"(?:{NUMBER})", "poss": "(.+?)'s"}


def _pattern(template: str) -> re.Pattern:
    """`template` as a regex: its literal text, each slot what it can hold (`SLOTS`, else any text)."""
    out = []
    for piece in re.split(r"(\{\w+\})", template):
        slot = re.fullmatch(r"\{(\w+)\}", piece)
        out.append(SLOTS.get(slot[1], "(.+?)") if slot else re.escape(piece))
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9'-]+", text.lower())


def _fragments(template: str, n: int = 3) -> set[str]:
    """Every run of `n` consecutive words (punctuation dropped) inside one literal piece of `template`."""
    out = set()
    for piece in re.split(r"\{\w+\}", template):
        ws = _words(piece)
        out |= {" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)}
    return out


def _rows(level: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"handoff_wordings_{level}.jsonl").read_text().splitlines()]


def _texts() -> list[str]:
    """Every share line and question of the three files."""
    return [
        t for lv in LEVELS for r in _rows(lv) for t in [*"\n".join(r["shares"]).split("\n"), r["question"]]
    ]


def _value(share: str) -> int:
    """The one number 10-99 a share states, in digits or words."""
    found = [int(x) for x in re.findall(r"\d+", share) if 10 <= int(x) <= 99]
    found += [v for v in range(10, 100) if re.search(rf"(?<![a-z-]){tw.number_words(v)}(?![a-z-])", share)]
    assert len(found) == 1, share
    return found[0]


def test_the_plain_template_list_is_what_the_plain_generator_draws():
    """Every share and question the plain generator draws is an instance of a PLAIN template."""
    for level in LEVELS:
        for it in th.make_items(level, 100, "train", 0):
            for text in [*it.shares, it.question]:
                assert any(_pattern(t).match(text) for t in PLAIN), text


@pytest.mark.parametrize("level", LEVELS)
def test_files_have_64_items_per_level_in_the_schema_with_answers_that_follow(level):
    """64 items of a level with unique ids, in the schema, no notes; one share (relay) or two; the answer
    is the one share's number, the named person's or place's number (pick) or the sum."""
    items = th.read_items(DATA / f"handoff_wordings_{level}.jsonl")
    assert len(items) >= 64 and len({it.id for it in items}) == len(items)
    for it in items:
        assert it.notes is None and len(it.shares) == (1 if level == "relay" else 2)
        vals = [_value(s) for s in it.shares]
        if level == "sum":
            assert int(it.answer) == sum(vals)
            continue
        named = [i for i, s in enumerate(it.shares) if _subject(s) in it.question]
        assert len(named) == 1 and int(it.answer) == vals[named[0]], it
    assert len({it.question for it in items}) > len(items) / 2


def _subject(share: str) -> str:
    """The person or place a code share is about (from the writer's own lists)."""
    (who,) = [x for x in mw.PEOPLE + mw.PLACES if re.search(rf"\b{x}\b", share)]
    return who


def test_values_and_names_were_never_trained_on():
    """Every number is a test-split value; no person's name is a plain generator name or one the
    made-up-name generator can spell (places are English phrases, not made-up names)."""
    for lv in LEVELS:
        for it in th.read_items(DATA / f"handoff_wordings_{lv}.jsonl"):
            assert all(th.split_of_value(_value(s)) == "test" for s in it.shares)
    for name in mw.PEOPLE:
        assert not tw.could_be_drawn(name) and name not in th.TRAIN_NAMES + th.TEST_NAMES, name


def test_no_training_template_appears_in_the_files():
    """No share line or question is an instance of a training template (plain or varied), and no run of
    three words from a training template's literal text appears in them."""
    texts = _texts()
    assert len(texts) >= 64 * 5
    hits = [(t, x) for t in TEMPLATES for x in texts if _pattern(t).match(x)]
    assert hits == []
    fragments = set().union(*(_fragments(t) for t in TEMPLATES))
    spaced = [f" {' '.join(_words(x))} " for x in texts]
    assert len(fragments) > 30 and sorted(f for f in fragments if any(f" {f} " in x for x in spaced)) == []


def test_the_writer_shares_no_code_with_the_generators_and_reproduces_the_files():
    """The writer imports nothing from eval/ (its templates, lists and number words are its own), and
    its draws are the committed files, line for line."""
    tree = ast.parse(Path(mw.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and not any(m.split(".")[0] == "eval" for m in imported)
    for level in LEVELS:
        want = (DATA / f"handoff_wordings_{level}.jsonl").read_text()
        assert "".join(json.dumps(r) + "\n" for r in mw.rows(level, 64, 57)) == want
