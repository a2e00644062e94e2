"""Writes bench/data/handoff_alt.jsonl: hand-off items in the schema with wording, names and objects that
the built-in generator (eval/tasks/handoff.py) never uses, to check that a trained channel is not tied to
one template. Values come from the generator's test split, so no value was seen in training.

Run: python bench/studies/make_handoff_alt.py
"""

import argparse
import json
import random
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from eval.tasks.handoff import values
from latent.args import add_config_arguments, config_from_args, run_script

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


@dataclass
class HandoffAltData:
    """Flags of the alternative-wording data generator."""

    out: str = field(
        default=str(Path(__file__).parents[1] / "data" / "handoff_alt.jsonl"), metadata={"help": "JSONL file"}
    )


def run(ns: argparse.Namespace) -> int:
    out = Path(config_from_args(HandoffAltData, ns).out)
    rng = random.Random(77)
    rows = [relay(rng, i) for i in range(64)] + [pick(rng, i) for i in range(64)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/make_handoff_alt.py",
        __doc__,
        partial(add_config_arguments, cls=HandoffAltData),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
