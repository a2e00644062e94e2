"""Hand-off items in many wordings (the `varied` wording set of `latentworks finetune mas --wordings`).

The plain generator (`eval/tasks/handoff.py`) writes every share one way ("Ann's locker code is 53."), and a
channel trained on it is tied to that wording. This one draws, per share, one of many templates and note
shapes (sentence, passive, memo, log line, table or CSV row, chat message, list item), a paraphrased
question, the number as digits or words (relay and pick; sum keeps digits, so its working line copies the
shares), sometimes a distractor sentence, and made-up entities: people, places and objects whose names are
built from syllables, not taken from a list.

Every item carries `notes`: what each holder hands on, the number in digits then the entity's made-up name
("53 Tavi"), since neither the share's first word nor its last number says that here.

Train and test are disjoint by value (`eval.tasks.handoff.split_of_value`) and by name (`split_of_name`),
and no train name contains or is contained in a plain test-split name. The other-wording evaluation files
(`bench/data/handoff_wordings_*.jsonl`) are written apart from this module, by their own templates.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass

from eval.tasks import handoff as th

WORDINGS = ("plain", "varied")
CONSONANTS, VOWELS = "bdfghjklmnprstvwz", "aeiou"
NUMBER_WORDS_LEVELS = ("relay", "pick")  # sum keeps digits: its working line "23 + 14 = 37." copies them
DISTRACTOR_P = 0.3  # share of shares that get an unrelated sentence before or after the fact

# Templates. Slots: {poss} "Tavi's" / "the Merin crate's", {of} "Tavi" / "the Merin crate", {attr} the
# attribute, {unit} what is counted, {num} the number, {other} another made-up name, {small} 2-9.
CODE_SHARES = (
    "{poss} {attr} is {num}.",
    "The {attr} of {of} is {num}.",
    "{num} is {poss} {attr}.",
    "{poss} {attr} was set to {num}.",
    "Someone changed {poss} {attr} to {num}.",
    "{of} got a new {attr}: {num}.",
    "Memo - {poss} {attr}: {num}",
    "MEMO: please note that {poss} {attr} reads {num}.",
    "[log] {attr} updated for {of} -> {num}",
    "log: {of} / {attr} / {num}",
    "| {of} | {attr} | {num} |",
    "{of}, {attr}, {num}",
    "{other}: fyi {poss} {attr} is {num} now",
    "<{other}> hey, {of} has {attr} {num}",
    "- {of}: {attr} {num}",
    "* {attr} ({of}) = {num}",
    "Reminder: {num} is the {attr} for {of}.",
    "If you need {poss} {attr}, it is {num}.",
    "For the record, {of} uses {attr} {num}.",
    "{of} was given {attr} {num} by {other}.",
)
CODE_QUESTIONS = (
    "What is {poss} {attr}?",
    "What is the {attr} of {of}?",
    "Which {attr} does {of} have?",
    "Tell me {poss} {attr}.",
    "{poss} {attr}: what is it?",
    "I need {poss} {attr}. What is it?",
    "Do you know the {attr} for {of}?",
)
COUNT_SHARES = (
    "{of} has {num} {unit}.",
    "{num} {unit} belong to {of}.",
    "There are {num} {unit} with {of}.",
    "{of} counted {num} {unit}.",
    "Inventory - {of}: {num} {unit}",
    "[log] {of} reported {num} {unit}",
    "| {of} | {unit} | {num} |",
    "{of}, {unit}, {num}",
    "{other}: {of} owns {num} {unit} as far as I know",
    "- {of}: {num} {unit}",
    "Memo: {of} keeps {num} {unit}.",
    "A count of {poss} {unit} gave {num}.",
    "{num} {unit} were handed to {of} by {other}.",
)
COUNT_QUESTIONS = (
    "How many {unit} do {a} and {b} have together?",
    "What is the total number of {unit} held by {a} and {b}?",
    "Add up the {unit} of {a} and {b}. How many?",
    "{a} and {b} pool their {unit}. How many are there?",
    "Together, how many {unit} do {a} and {b} have?",
)
DISTRACTORS = (
    "{other} was out today.",
    "The printer on floor {small} is broken again.",
    "Lunch moved to the {other} room.",
    "{other} says hi.",
    "Nothing else changed.",
    "Call {other} if anything breaks.",
    "Meeting at {small} pm.",
    "({small} other notes were filed today.)",
)
TEMPLATES = {
    "code_shares": CODE_SHARES,
    "code_questions": CODE_QUESTIONS,
    "count_shares": COUNT_SHARES,
    "count_questions": COUNT_QUESTIONS,
    "distractors": DISTRACTORS,
}

# What the made-up names stand for: a person ("Tavi"), a place ("Merin Hall") or an object ("the Merin
# crate"), each with the attributes it can have.
PLACE_NOUNS = ("Hall", "Yard", "Depot", "Square", "Lodge", "Tower", "Market", "Station")
OBJECT_NOUNS = ("crate", "van", "safe", "cabinet", "bike", "trunk", "locker", "kiosk")
ATTRS = {
    "person": (
        "locker code", "room number", "bus number", "seat number", "house number", "lucky number",
        "badge number", "desk number", "table number", "ticket number", "jersey number", "pin",
    ),
    "place": ("door code", "gate code", "alarm code", "dock number", "platform number", "wifi pin"),
    "object": ("lock code", "tag number", "combination", "shelf number", "serial suffix"),
}  # fmt: skip
UNITS = (
    "marbles", "stamps", "coins", "shells", "cards", "pens", "apples", "books", "tickets", "buttons",
    "keys", "eggs", "candles", "bolts", "badges", "postcards",
)  # fmt: skip
_ONES = "zero one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


@dataclass(frozen=True)
class _Entity:
    name: str  # the made-up name: what the note and the question both carry
    of: str  # "Tavi", "Merin Hall", "the Merin crate"
    kind: str

    @property
    def poss(self) -> str:
        return self.of + "'s"


def split_of_name(name: str) -> str:
    """'test' for about a quarter of made-up names (by a checksum of the lower-cased name), else 'train'."""
    return "test" if zlib.crc32(name.lower().encode()) % 4 == 0 else "train"


def made_up_name(rng: random.Random, split: str) -> str:
    """A pronounceable name of 2-3 consonant-vowel syllables (sometimes a closing consonant) of `split`;
    never containing, or contained in, a plain test-split name, so the plain test split stays held out."""
    plain_tests = [n.lower() for n in th.TEST_NAMES]
    while True:
        syl = [rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((2, 2, 3)))]
        name = "".join(syl) + (rng.choice(CONSONANTS) if rng.random() < 0.4 else "")
        if split_of_name(name) == split and not any(t in name or name in t for t in plain_tests):
            return name.capitalize()


def could_be_drawn(name: str) -> bool:
    """Whether `made_up_name` can produce `name` in some split: lets a test show that an evaluation file's
    names are none of this generator's."""
    syl = f"[{CONSONANTS}][{VOWELS}]"
    return re.fullmatch(rf"(?:{syl}){{2,3}}[{CONSONANTS}]?", name.lower()) is not None


def number_words(v: int) -> str:
    """10..99 in words: 53 -> "fifty-three"."""
    if v < 20:
        return _TEENS[v - 10]
    return _TENS[v // 10] + ("" if v % 10 == 0 else "-" + _ONES[v % 10])


def _names(rng: random.Random, split: str, n: int) -> list[str]:
    """`n` distinct made-up names, none containing another (so a question naming one names only it)."""
    out: list[str] = []
    while len(out) < n:
        name = made_up_name(rng, split)
        if not any(name.lower() in o.lower() or o.lower() in name.lower() for o in out):
            out.append(name)
    return out


def _entity(rng: random.Random, name: str, kind: str) -> _Entity:
    if kind == "person":
        return _Entity(name, name, kind)
    if kind == "place":
        return _Entity(name, f"{name} {rng.choice(PLACE_NOUNS)}", kind)
    return _Entity(name, f"the {name} {rng.choice(OBJECT_NOUNS)}", kind)


def _fill(template: str, **slots: str) -> str:
    text = template.format(**slots)
    return text[0].upper() + text[1:]


def _share(rng: random.Random, template: str, ent: _Entity, num: str, other: str, **slots: str) -> str:
    """One share: the fact in `template`, sometimes with a distractor sentence before or after it."""
    fact = _fill(template, poss=ent.poss, of=ent.of, num=num, other=other, **slots)
    if rng.random() >= DISTRACTOR_P:
        return fact
    noise = _fill(rng.choice(DISTRACTORS), other=other, small=str(rng.randint(2, 9)))
    return f"{noise}\n{fact}" if rng.random() < 0.5 else f"{fact}\n{noise}"  # a line of its own


def make_item(level: str, split: str, rng: random.Random, item_id: str) -> th.HandoffItem:
    """One item of `level` from `split`'s values and made-up names, in drawn wordings, with its notes."""
    if level not in th.LEVELS or split not in th.SPLITS:
        raise ValueError(f"unknown level or split {level!r}, {split!r}; use {th.LEVELS} and {th.SPLITS}.")
    n = 1 if level == "relay" else 2
    names = _names(rng, split, n + 1)  # the last one only speaks or stands in a distractor
    other = names[-1]

    def num(v: int) -> str:
        return number_words(v) if level in NUMBER_WORDS_LEVELS and rng.random() < 0.3 else str(v)

    if level in ("relay", "pick"):
        kind = rng.choice(tuple(ATTRS))
        ents = [_entity(rng, names[i], kind) for i in range(n)]
        attr = rng.choice(ATTRS[kind])
        vals = rng.sample(th.values(split), n)
        shares = [
            _share(rng, rng.choice(CODE_SHARES), e, num(v), other, attr=attr) for e, v in zip(ents, vals)
        ]
        i = rng.randrange(n)
        q = _fill(rng.choice(CODE_QUESTIONS), poss=ents[i].poss, of=ents[i].of, attr=attr)
        answer = vals[i]
    else:
        kind = rng.choice(("person", "place"))
        ents = [_entity(rng, names[i], kind) for i in range(n)]
        unit = rng.choice(UNITS)
        vals = [rng.choice(th.values(split, 10, 49)) for _ in range(n)]
        shares = [
            _share(rng, rng.choice(COUNT_SHARES), e, str(v), other, unit=unit) for e, v in zip(ents, vals)
        ]
        q = _fill(rng.choice(COUNT_QUESTIONS), unit=unit, a=ents[0].of, b=ents[1].of)
        answer = sum(vals)
    notes = [f"{v} {e.name}" for e, v in zip(ents, vals)]
    return th.HandoffItem(item_id, shares, q, str(answer), notes)


def make_items(level: str, n: int, split: str = "test", seed: int = 0) -> list[th.HandoffItem]:
    """`n` items of `level` (or 'mixed': the three levels in turn) from `split`, seeded."""
    levels = th.LEVELS if level == "mixed" else (level,)
    rng = random.Random(f"handoff-varied-{level}-{split}-{seed}")
    return [
        make_item(levels[i % len(levels)], split, rng, f"handoff-varied-{level}-{split}-{seed}-{i}")
        for i in range(n)
    ]


def holds_test_name(item: th.HandoffItem) -> bool:
    """Whether a note of `item` names a test-split made-up name (a training item must not)."""
    return any(split_of_name(n.split(" ", 1)[1]) == "test" for n in item.notes or [])
