"""Writes bench/data/handoff_alt.jsonl: hand-off items in the schema with wording, names and objects that
the built-in generator (eval/tasks_handoff.py) never uses, to check that a trained channel is not tied to
one template. Values come from the generator's test split, so no value was seen in training.

Run: python bench/data/make_handoff_alt.py
"""

import json
import random
from pathlib import Path

from eval.tasks_handoff import values

PEOPLE = ("Priya", "Mateo", "Yuki", "Kofi", "Ingrid", "Rafael", "Aisha", "Dmitri", "Chloe", "Tariq")
THINGS = ("bike lock", "gym locker", "apartment door", "parcel box", "storage unit", "mailbox")


def relay(rng, i):
    p, t, v = rng.choice(PEOPLE), rng.choice(THINGS), rng.choice(values("test"))
    share = f"Note for you: the PIN on {p}'s {t} is {v}."
    return {
        "id": f"alt-relay-{i}",
        "shares": [share],
        "question": f"Which PIN opens {p}'s {t}?",
        "answer": str(v),
    }


def pick(rng, i):
    a, b = rng.sample(PEOPLE, 2)
    t = rng.choice(THINGS)
    va, vb = rng.sample(values("test"), 2)
    ask, ans = (a, va) if rng.random() < 0.5 else (b, vb)
    shares = [f"Note for you: the PIN on {a}'s {t} is {va}.", f"Note for you: the PIN on {b}'s {t} is {vb}."]
    return {
        "id": f"alt-pick-{i}",
        "shares": shares,
        "question": f"Which PIN opens {ask}'s {t}?",
        "answer": str(ans),
    }


def main() -> None:
    rng = random.Random(77)
    rows = [relay(rng, i) for i in range(64)] + [pick(rng, i) for i in range(64)]
    out = Path(__file__).parent / "handoff_alt.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
