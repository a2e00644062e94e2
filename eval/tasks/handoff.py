"""The hand-off task: the information is split across agents, so the final agent can answer only from
what the others hand on.

Item schema (one JSON object per line): {"id": str, "shares": [str, ...], "question": str, "answer": str}.
Upstream agent i (graph order) reads the question and shares[i]; the final agent reads the question only
(`agents.handoff_graph(len(shares))`, `agents.run(..., shares=...)`).

Built-in generator, three levels:
- relay: one share holds a number; the question asks for it;
- pick: two shares hold different numbers for two people; the question asks for one of them;
- sum: two shares hold two counts; the answer is their sum.
Train and test splits are disjoint by value (every number in a share) and by entity name, so no test
fact is ever seen in training; `split_of_value` and the name lists define the split.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

LEVELS = ("relay", "pick", "sum")
SPLITS = ("train", "test")

TRAIN_NAMES = (
    "Ann", "Ben", "Mia", "Sam", "Lily", "Max", "Emma", "Leo", "Ava", "Tom", "Nina", "Omar", "Ruth", "Paul",
    "Jade", "Hugo", "Iris", "Carl", "Dana", "Eli", "Fay", "Gus", "Hana", "Ivan",
)  # fmt: skip
TEST_NAMES = ("Zoe", "Noah", "Kate", "Luke", "Rosa", "Theo", "Vera", "Owen", "Sara", "Finn", "Lena", "Adam")
CODES = ("locker code", "room number", "bus number", "seat number", "house number", "lucky number")
COUNTS = ("marbles", "stamps", "coins", "shells", "cards", "pens")


@dataclass(frozen=True)
class HandoffItem:
    id: str
    shares: list[str]
    question: str
    answer: str
    # what each holder hands on ("53 Tavi": the number, then whose); None: read from the share itself (the
    # plain wording's first word and last number). Set by the varied wordings (eval/tasks/handoff_wordings.py)
    notes: list[str] | None = None


def split_of_value(v: int) -> str:
    """'test' for about a quarter of 10..99 (digit sum divisible by 4), 'train' otherwise: both splits use
    every digit in both places, but no number is in both."""
    return "test" if (v // 10 + v % 10) % 4 == 0 else "train"


def values(split: str, lo: int = 10, hi: int = 99) -> list[int]:
    return [v for v in range(lo, hi + 1) if split_of_value(v) == split]


def _check(level: str, split: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown hand-off level {level!r}; use one of {LEVELS}.")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use 'train' or 'test'.")


def make_item(level: str, split: str, rng: random.Random, item_id: str) -> HandoffItem:
    """One item of `level` from `split`'s names and values."""
    _check(level, split)
    names = TRAIN_NAMES if split == "train" else TEST_NAMES
    if level == "relay":
        name, what, v = rng.choice(names), rng.choice(CODES), rng.choice(values(split))
        return HandoffItem(item_id, [f"{name}'s {what} is {v}."], f"What is {name}'s {what}?", str(v))
    if level == "pick":
        a, b = rng.sample(names, 2)
        what = rng.choice(CODES)
        va, vb = rng.sample(values(split), 2)
        ask, ans = (a, va) if rng.random() < 0.5 else (b, vb)
        shares = [f"{a}'s {what} is {va}.", f"{b}'s {what} is {vb}."]
        return HandoffItem(item_id, shares, f"What is {ask}'s {what}?", str(ans))
    a, b = rng.sample(names, 2)
    what = rng.choice(COUNTS)
    va, vb = rng.choice(values(split, 10, 49)), rng.choice(values(split, 10, 49))
    shares = [f"{a} has {va} {what}.", f"{b} has {vb} {what}."]
    return HandoffItem(item_id, shares, f"How many {what} do {a} and {b} have together?", str(va + vb))


def make_items(level: str, n: int, split: str = "test", seed: int = 0) -> list[HandoffItem]:
    """`n` items of `level` (or 'mixed': the three levels in turn) from `split`, seeded."""
    levels = LEVELS if level == "mixed" else (level,)
    for lv in levels:
        _check(lv, split)
    rng = random.Random(f"handoff-{level}-{split}-{seed}")
    return [
        make_item(levels[i % len(levels)], split, rng, f"handoff-{level}-{split}-{seed}-{i}")
        for i in range(n)
    ]


def read_items(path: str | Path) -> list[HandoffItem]:
    """Items from a JSONL file in the schema; a bad line is an error naming the line and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no hand-off file at {str(path)!r}; check the path.")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {n} is not JSON ({err.msg}). Fix the line.") from None
        out.append(item_from_row(row, f"{path}: line {n}"))
    if not out:
        raise ValueError(f"{path} holds no hand-off items.")
    return out


def item_from_row(row: object, where: str = "row") -> HandoffItem:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a hand-off item must be a JSON object with id, shares, question, answer.")
    for key in ("id", "question", "answer"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"{where}: field `{key}` must be a non-empty string.")
    shares = row.get("shares")
    if (
        not isinstance(shares, list)
        or not shares
        or not all(isinstance(s, str) and s.strip() for s in shares)
    ):
        raise ValueError(f"{where}: field `shares` must be a non-empty list of non-empty strings.")
    notes = row.get("notes")
    if notes is not None and (
        not isinstance(notes, list) or len(notes) != len(shares) or not all(isinstance(n, str) for n in notes)
    ):
        raise ValueError(f"{where}: field `notes`, when given, must be a list of strings, one per share.")
    return HandoffItem(row["id"], list(shares), row["question"], row["answer"], notes)


def write_items(items: list[HandoffItem], path: str | Path) -> None:
    rows = ({k: v for k, v in asdict(it).items() if v is not None} for it in items)  # no notes: no key
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))


def oracle_question(item: HandoffItem) -> str:
    """One prompt with every share and the question (the oracle row: no hand-off needed)."""
    return " ".join(item.shares) + "\n\n" + item.question
