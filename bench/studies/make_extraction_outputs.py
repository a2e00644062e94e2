"""Generate the raw model outputs behind the labelled answer-extraction set (bench/data/extraction_set.jsonl).

Greedy SmolLM2-135M-Instruct on math word problems and multiple-choice questions, each asked in one
of several answer-format styles, so the outputs show the phrasings real models write. The outputs
were then labelled by hand (what answer the text commits to, if any, with a note quoting the text)
and stored with the labels in bench/data/extraction_set.jsonl; this script only regenerates the raw
text (greedy decoding, so the same outputs on the same model and library versions).

Run: `nice python bench/studies/make_extraction_outputs.py --model /work/models/smollm2-135m-instruct`.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import add_config_arguments, config_from_args, run_script

MATH_STYLES = [
    "\n\nPut your final answer in \\boxed{}.",
    "\n\nEnd your reply with 'The answer is N.'",
    "\n\nShow your steps, then write the final answer after '####'.",
    "",
    "\n\nAnswer with just the number.",
]
MC_STYLES = [
    "\n\nAnswer with the letter of the correct option in \\boxed{}.",
    "\n\nReply with 'Answer: X' where X is the letter.",
    "\n\nExplain briefly, then give the letter of your choice.",
    "",
]
# Plain-language word problems with varied answer types (integers, negatives, fractions, decimals).
EXTRA_MATH = [
    (
        "A rope is 3/4 of a meter long. Half of it is cut off. How long is the remaining piece in meters?",
        "3/8",
    ),
    ("The temperature was 4 degrees and fell by 7 degrees. What is the temperature now?", "-3"),
    ("Tom has 2 and a half pizzas and eats 1. How many pizzas are left?", "3/2"),
    ("What is 0.25 plus 0.5?", "3/4"),
    ("A shirt costs $20 and is 15% off. What is the sale price in dollars?", "17"),
    ("What is 12 divided by 8?", "3/2"),
    ("Sara had 15 stickers and gave away 9. How many does she have now?", "6"),
    ("What is seven times eight?", "56"),
    ("A car travels 60 km per hour for 2.5 hours. How far does it go in km?", "150"),
    ("What is 1,000 minus 1?", "999"),
    ("If x + 5 = 2, what is x?", "-3"),
    ("What is one third of 27?", "9"),
    ("A box holds 24 eggs. How many boxes are needed for 100 eggs?", "5"),
    ("What is 3 squared plus 4 squared?", "25"),
    ("Jane reads 12 pages a day. How many pages does she read in two weeks?", "168"),
]
MC_QUESTIONS = [
    ("What is the capital of France?", ["Berlin", "Madrid", "Paris", "Rome"], "C"),
    ("Which planet is known as the Red Planet?", ["Venus", "Mars", "Jupiter", "Saturn"], "B"),
    ("What gas do plants absorb from the air?", ["Oxygen", "Nitrogen", "Carbon dioxide", "Helium"], "C"),
    ("How many legs does a spider have?", ["6", "8", "10", "12"], "B"),
    ("What is the boiling point of water at sea level in Celsius?", ["50", "90", "100", "120"], "C"),
    ("Which animal is a mammal?", ["Shark", "Dolphin", "Trout", "Octopus"], "B"),
    ("What is 9 times 7?", ["56", "63", "72", "81"], "B"),
    ("Which organ pumps blood through the body?", ["Lungs", "Liver", "Heart", "Kidney"], "C"),
    ("What is the largest ocean on Earth?", ["Atlantic", "Indian", "Arctic", "Pacific"], "D"),
    (
        "Who wrote 'Romeo and Juliet'?",
        ["Charles Dickens", "William Shakespeare", "Jane Austen", "Mark Twain"],
        "B",
    ),
    ("What is the chemical symbol for gold?", ["Ag", "Au", "Gd", "Go"], "B"),
    ("Which of these is a prime number?", ["9", "15", "17", "21"], "C"),
    ("What do bees make?", ["Milk", "Honey", "Silk", "Wax paper"], "B"),
    ("Which shape has three sides?", ["Square", "Circle", "Triangle", "Hexagon"], "C"),
    ("What is frozen water called?", ["Steam", "Ice", "Fog", "Dew"], "B"),
    ("Which is the smallest unit of life?", ["Atom", "Cell", "Organ", "Tissue"], "B"),
    ("How many continents are there?", ["5", "6", "7", "8"], "C"),
    ("What force pulls objects toward the Earth?", ["Magnetism", "Friction", "Gravity", "Tension"], "C"),
    (
        "Which language has the most native speakers?",
        ["English", "Spanish", "Mandarin Chinese", "Hindi"],
        "C",
    ),
    ("What is the square root of 81?", ["7", "8", "9", "10"], "C"),
    ("Which metal is liquid at room temperature?", ["Iron", "Mercury", "Copper", "Zinc"], "B"),
    ("Which season comes after winter?", ["Summer", "Autumn", "Spring", "Monsoon"], "C"),
    ("What is the main language of Brazil?", ["Spanish", "Portuguese", "French", "English"], "B"),
    ("Which instrument has 88 keys?", ["Guitar", "Violin", "Piano", "Flute"], "C"),
    ("What is 15% of 200?", ["15", "20", "30", "45"], "C"),
    ("Which is a renewable energy source?", ["Coal", "Oil", "Wind", "Natural gas"], "C"),
    ("Where is the Great Pyramid of Giza?", ["Mexico", "Egypt", "Peru", "India"], "B"),
    ("What is the opposite of 'ancient'?", ["Old", "Modern", "Historic", "Antique"], "B"),
    ("How many minutes are in an hour?", ["30", "60", "90", "100"], "B"),
    ("Which bird cannot fly?", ["Eagle", "Sparrow", "Penguin", "Parrot"], "C"),
]


def build_prompts(n_arith: int, seed: int) -> list[dict]:
    from eval.tasks import load_task

    rng = random.Random(seed)
    rows = []
    arith = load_task("arith", limit=n_arith, seed=seed).items
    math_q = [(it.question, it.gold) for it in arith] + EXTRA_MATH
    for i, (q, gold) in enumerate(math_q):
        style = MATH_STYLES[i % len(MATH_STYLES)]
        rows.append({"id": f"math-{i}", "kind": "math", "question": q, "gold": gold, "prompt": q + style})
    for rep in range(4):
        for i, (q, opts, gold) in enumerate(MC_QUESTIONS):
            order = list(range(len(opts)))
            if rep:
                rng.shuffle(order)
            shown = [opts[j] for j in order]
            letter = "ABCD"[order.index("ABCD".index(gold))]
            listing = "\n".join(f"{'ABCD'[k]}. {o}" for k, o in enumerate(shown))
            style = MC_STYLES[(i + rep) % len(MC_STYLES)]
            prompt = f"{q}\n{listing}{style}"
            rows.append(
                {
                    "id": f"mc-{rep}-{i}",
                    "kind": "mc",
                    "question": q,
                    "choices": shown,
                    "gold": letter,
                    "prompt": prompt,
                }
            )
    return rows


@dataclass
class ExtractionOutputs:
    """Flags of the raw-output generator."""

    model: str = field(
        default="/work/models/smollm2-135m-instruct", metadata={"help": "load_model name or path"}
    )
    out: str = field(default="/tmp/extraction_raw.jsonl", metadata={"help": "JSONL file (appended; resumes)"})
    n_arith: int = field(default=75, metadata={"help": "arithmetic word problems"})
    batch_size: int = field(default=42, metadata={"help": "prompts per generate call"})
    max_new_tokens: int = field(default=128, metadata={"help": "decode budget per output"})
    seed: int = field(default=0, metadata={"help": "seed of the prompts"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(ExtractionOutputs, ns)
    import torch

    from latent import load_model

    torch.set_num_threads(1)
    rows = build_prompts(args.n_arith, args.seed)
    model = load_model(args.model)
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {json.loads(line)["id"] for line in out.read_text().splitlines() if line.strip()}
    todo = [r for r in rows if r["id"] not in done]
    start = time.time()
    with open(out, "a") as fh:
        for b in range(0, len(todo), args.batch_size):
            batch = todo[b : b + args.batch_size]
            gen = model.generate(
                **model.encode([r["prompt"] for r in batch], chat=True), max_new_tokens=args.max_new_tokens
            )
            for r, text in zip(batch, gen.texts):
                fh.write(json.dumps({**r, "output": text}) + "\n")
            fh.flush()
            print(f"{b + len(batch)}/{len(todo)} in {time.time() - start:.0f}s", flush=True)

    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/make_extraction_outputs.py",
        __doc__,
        partial(add_config_arguments, cls=ExtractionOutputs),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
