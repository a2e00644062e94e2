"""Writes bench/data/handoff_wordings_{relay,pick,sum}.jsonl: hand-off items in the schema whose wording was
written by hand for this file, apart from the training generators (eval/tasks/handoff.py and
eval/tasks/handoff_wordings.py): its own templates, names, places and units, its own number words, and not
one import from eval/. It measures whether a trained channel carries a share whatever its wording.

Values follow the test split's rule (digit sum divisible by 4), restated here, so no value was trained on;
the names are ones the made-up-name generator cannot spell (a test checks both, and that no training
template shows up in these files).

Run: python bench/studies/make_handoff_wordings.py
"""

import argparse
import json
import random
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import add_config_arguments, config_from_args, run_script

PEOPLE = (
    "Priya", "Bronwyn", "Thandiwe", "Xiomara", "Caoimhe", "Oluwaseun", "Chidi", "Yusuf", "Anneliese",
    "Quentin", "Ximena", "Lucia", "Marcus", "Ingrid", "Declan", "Esther", "Aurelio", "Svetlana", "Sigrun",
    "Ottilie", "Cyprian", "Wojciech", "Agnieszka", "Thorsten", "Beatrix", "Clement",
)  # fmt: skip
PLACES = (
    "Harbour Street bike shed", "Elmwood clinic", "north stairwell", "Cedar Lane workshop", "old boathouse",
    "rooftop greenhouse", "basement archive", "Quarry Road garage", "east wing pharmacy", "chapel vestry",
    "loading bay", "staff canteen",
)  # fmt: skip
UNITS = (
    "tennis balls", "paint tins", "seed packets", "spare tyres", "jam jars", "lanterns", "umbrellas",
    "chess sets", "blankets", "teacups", "flower pots", "rolls of tape",
)  # fmt: skip

# Code facts, by what the number is: share templates ({x} the place or person, {n} the number) and the
# questions that ask for it. Pick items use two facts of one kind, about two different places or people.
CODE_FACTS = {
    "lock": (
        (
            "Memo: the {x} lock was reset; its new code is {n}.",
            "Facilities update - the keypad at the {x} now opens with {n}.",
            "Heads up from maintenance: {n} opens the {x} door from today.",
            "The {x} padlock combination got changed to {n} this morning. The kettle there is fixed too.",
        ),
        (
            "Which code opens the {x} lock now?",
            "What number does the keypad at the {x} take?",
        ),
    ),
    "extension": (
        (
            "Directory change: {x} can be reached on extension {n}.",
            "From HR: {x} moved desks and picked up extension {n}.",
            "ext. {n} -> {x} (updated)",
        ),
        (
            "On which extension can {x} be reached?",
            "What extension does {x} answer?",
        ),
    ),
    "gate": (
        (
            "Travel desk: the train {x} booked leaves from platform {n}.",
            "Itinerary note. Passenger {x}; boarding gate {n}.",
            "Text message received - boarding at gate {n}, see you soon! ({x})",
        ),
        ("From which gate or platform does {x} depart?",),
    ),
    "parcel": (
        (
            "Delivery notice: the parcel for {x} is waiting in locker {n}.",
            "Our courier left the package addressed to {x} in pickup box {n}.",
        ),
        (
            "In which locker is the parcel for {x}?",
            "Where is the package for {x}: which box number?",
        ),
    ),
    "room": (
        (
            "Reception log, {x} checked in to room {n}.",
            "Guest list entry: {x}, room {n}, two nights",
        ),
        ("Which room is {x} staying in?",),
    ),
}
# Count facts for sum items ({x} a person, {n} the count, {u} the unit) and their questions ({a}, {b}).
COUNT_SHARES = (
    "Stocktake: {x} is holding {n} {u} on the shelf.",
    "Tally sheet -- {x}: {n} {u}.",
    "Quick update from {x}: I've packed {n} {u} so far.",
    "Receipt: {n} x {u}, kept by {x}",
    "According to the storeroom book, {x} looks after {n} {u}.",
    "{x} wrote back: 'I still have {n} {u} here.'",
)
SUM_QUESTIONS = (
    "How many {u} do {a} and {b} have between them?",
    "If {a} and {b} combine their {u}, how big is the pile?",
    "{a} and {b} put their {u} in one box. How many {u} are in it?",
)
ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
TEENS = ("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
         "nineteen")  # fmt: skip


def held_out_values(lo: int, hi: int) -> list[int]:
    """lo..hi with a digit sum divisible by 4: the hand-off test split's values, restated here."""
    return [v for v in range(lo, hi + 1) if (v // 10 + v % 10) % 4 == 0]


def in_words(v: int) -> str:
    """10..99 spelled out ("forty-four")."""
    if v < 20:
        return TEENS[v - 10]
    return TENS[v // 10] + (f"-{ONES[v % 10]}" if v % 10 else "")


def written(rng: random.Random, v: int) -> str:
    """A quarter of the numbers in words, the rest in digits."""
    return in_words(v) if rng.random() < 0.25 else str(v)


def code_item(rng: random.Random, level: str, i: int) -> dict:
    """A relay (one share) or pick (two shares, the question names one) item about a place or a person."""
    kind = rng.choice(sorted(CODE_FACTS))
    shares_t, questions_t = CODE_FACTS[kind]
    pool = PLACES if kind == "lock" else PEOPLE
    n = 1 if level == "relay" else 2
    who = rng.sample(pool, n)
    vals = rng.sample(held_out_values(10, 99), n)
    shares = [rng.choice(shares_t).format(x=x, n=written(rng, v)) for x, v in zip(who, vals)]
    k = rng.randrange(n)
    question = rng.choice(questions_t).format(x=who[k])
    return {"id": f"wordings-{level}-{i}", "shares": shares, "question": question, "answer": str(vals[k])}


def sum_item(rng: random.Random, i: int) -> dict:
    """Two people's counts of one unit; the answer is their total."""
    a, b = rng.sample(PEOPLE, 2)
    unit = rng.choice(UNITS)
    va, vb = (rng.choice(held_out_values(10, 49)) for _ in range(2))
    shares = [rng.choice(COUNT_SHARES).format(x=x, n=v, u=unit) for x, v in ((a, va), (b, vb))]
    question = rng.choice(SUM_QUESTIONS).format(a=a, b=b, u=unit)
    return {"id": f"wordings-sum-{i}", "shares": shares, "question": question, "answer": str(va + vb)}


@dataclass
class HandoffWordingsData:
    """Flags of the other-wording evaluation files."""

    out_dir: str = field(
        default=str(Path(__file__).parents[1] / "data"), metadata={"help": "folder the three files go to"}
    )
    n: int = field(default=64, metadata={"help": "items per level"})
    seed: int = field(default=57, metadata={"help": "seed of the draws"})


def rows(level: str, n: int, seed: int) -> list[dict]:
    """The `n` items of `level`, seeded by level and seed."""
    rng = random.Random(f"wordings-{level}-{seed}")
    return [sum_item(rng, i) if level == "sum" else code_item(rng, level, i) for i in range(n)]


def run(ns: argparse.Namespace) -> int:
    cfg = config_from_args(HandoffWordingsData, ns)
    for level in ("relay", "pick", "sum"):
        path = Path(cfg.out_dir) / f"handoff_wordings_{level}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows(level, cfg.n, cfg.seed)))
        print(f"wrote {cfg.n} {level} items to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/make_handoff_wordings.py",
        __doc__,
        partial(add_config_arguments, cls=HandoffWordingsData),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
