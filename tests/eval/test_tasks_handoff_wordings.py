"""The varied hand-off wordings (`eval/tasks/handoff_wordings.py`): templates vary, every item is valid
in the schema, each share holds its number exactly as the answer needs it, and train and test are disjoint
by value and by made-up name."""

import re
from dataclasses import asdict

import pytest

from eval.tasks import handoff as th
from eval.tasks import handoff_wordings as tw


def _pattern(template: str) -> re.Pattern:
    """A template as a regex: its literal text, each slot any text."""
    parts = re.split(r"\{\w+\}", template)
    return re.compile("^" + "(.+?)".join(re.escape(p) for p in parts) + "$", re.IGNORECASE | re.DOTALL)


def _value_in(share: str, v: int) -> list[str]:
    """How `v` appears in `share` as a whole number: its digits or its words, each occurrence."""
    return re.findall(rf"(?<![\d-])(?:{v}|{tw.number_words(v)})(?![\d-])", share, re.IGNORECASE)


def _fact(share: str) -> str:
    """The share without a distractor line."""
    lines = share.split("\n")
    return (
        next(x for x in lines if not any(_pattern(d).match(x) for d in tw.DISTRACTORS))
        if len(lines) > 1
        else share
    )


def _items(level: str, n: int = 300, split: str = "train", seed: int = 0):
    return tw.make_items(level, n, split, seed)


def test_templates_shapes_and_questions_vary():
    """Over 300 items per level, almost every share and question template is used, numbers appear as
    words in relay and pick (never in sum), and some shares carry a distractor line."""
    for level, shares, questions in (
        ("relay", tw.CODE_SHARES, tw.CODE_QUESTIONS),
        ("pick", tw.CODE_SHARES, tw.CODE_QUESTIONS),
        ("sum", tw.COUNT_SHARES, tw.COUNT_QUESTIONS),
    ):
        items = _items(level)
        facts = [_fact(s) for it in items for s in it.shares]
        used = {t for t in shares if any(_pattern(t).match(f) for f in facts)}
        asked = {t for t in questions if any(_pattern(t).match(it.question) for it in items)}
        assert len(used) == len(shares) and len(asked) == len(questions), level
        worded = sum(
            bool(
                re.search(r"[a-z]+-[a-z]+|\b(ten|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)\b", f)
            )
            for f in facts
        )
        assert (worded > len(facts) / 10) if level != "sum" else worded == 0, level
        assert len(facts) / 10 < sum("\n" in s for it in items for s in it.shares) < len(facts) / 2
    kinds = {
        ("Hall" in s or "Yard" in s, " the " in f" {s.lower()}") for it in _items("relay") for s in it.shares
    }
    assert len(kinds) >= 3  # people, places and objects


@pytest.mark.parametrize("level", th.LEVELS)
def test_items_are_valid_and_each_share_holds_its_number_once(level):
    """Each item round-trips through the schema with one note per share; the note's number stands in its
    share exactly once (digits or words) and its name too; the answer follows from the notes."""
    for it in _items(level, 200) + _items(level, 100, "test"):
        assert th.item_from_row(asdict(it)) == it
        assert len(it.notes) == len(it.shares) == (1 if level == "relay" else 2)
        values, names = zip(*(n.split(" ", 1) for n in it.notes))
        assert len(set(names)) == len(names)
        for share, v, name in zip(it.shares, values, names):
            assert len(_value_in(share, int(v))) == 1, share
            assert re.search(rf"\b{name}\b", share) and tw.could_be_drawn(name)
            # no other number of 10-99 stands in the share (distractors use 2-9)
            assert all(int(x) < 10 or x == v for x in re.findall(r"\d+", share)), share
        asked = [name for name in names if re.search(rf"\b{name}\b", it.question)]
        if level == "sum":
            assert sorted(asked) == sorted(names) and int(it.answer) == sum(map(int, values))
        else:
            assert len(asked) == 1 and it.answer == values[names.index(asked[0])]


def test_train_and_test_are_disjoint_by_value_and_by_name():
    """No value or made-up name of the test split is drawn in training; no training name contains or is
    contained in a plain test-split name."""
    split = {s: [it for level in th.LEVELS for it in tw.make_items(level, 400, s, 1)] for s in th.SPLITS}
    vals = {s: {int(n.split()[0]) for it in its for n in it.notes} for s, its in split.items()}
    names = {s: {n.split(" ", 1)[1] for it in its for n in it.notes} for s, its in split.items()}
    assert vals["train"] and vals["test"] and not vals["train"] & vals["test"]
    assert names["train"] and names["test"] and not names["train"] & names["test"]
    assert all(tw.split_of_name(n) == s for s in th.SPLITS for n in names[s])
    plain = [t.lower() for t in th.TEST_NAMES]
    assert not any(t in n.lower() or n.lower() in t for n in names["train"] for t in plain)
    assert not any(tw.holds_test_name(it) for it in split["train"])
    assert all(tw.holds_test_name(it) for it in split["test"])


def test_generator_is_seeded_and_names_are_made_up():
    """Same seed, same items; over a few hundred items, hundreds of distinct names (not a fixed list)."""
    assert tw.make_items("mixed", 9, seed=4) == tw.make_items("mixed", 9, seed=4)
    assert tw.make_items("mixed", 9, seed=4) != tw.make_items("mixed", 9, seed=5)
    names = {n.split(" ", 1)[1] for it in _items("pick") for n in it.notes}
    assert len(names) > 400
    assert (
        tw.number_words(53) == "fifty-three"
        and tw.number_words(40) == "forty"
        and tw.number_words(13) == "thirteen"
    )
    with pytest.raises(ValueError, match="unknown level"):
        tw.make_items("swap", 1)


def test_written_items_keep_their_notes_and_plain_items_write_no_notes_key(tmp_path):
    """A file of varied items reads back with its notes; a plain item's row has no `notes` key."""
    items = tw.make_items("pick", 5, seed=2)
    th.write_items(items, tmp_path / "v.jsonl")
    assert th.read_items(tmp_path / "v.jsonl") == items
    th.write_items(th.make_items("pick", 2), tmp_path / "p.jsonl")
    assert '"notes"' not in (tmp_path / "p.jsonl").read_text()
    with pytest.raises(ValueError, match="notes"):
        th.item_from_row(
            {"id": "a", "shares": ["x 12"], "question": "x?", "answer": "12", "notes": ["1", "2"]}
        )
