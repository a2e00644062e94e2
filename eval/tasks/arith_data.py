"""Synthetic, checkable multi-step arithmetic word problems for the built-in models.

Every problem is a short story: a start amount, then 1-4 operations (add, subtract, multiply by a
small factor), mixed with distractor sentences that carry irrelevant numbers. The solution is one
line per operation ("23 + 12 = 35.") and ends in ``\\boxed{answer}``. The format is deliberately
fixed and short: a few-million-parameter model trained on two CPU cores can learn it, and any
answer can be checked by recomputation.

Held-out problems use different random seeds *and* story templates never seen in training
(``HELDOUT_TEMPLATES``), so held-out accuracy measures generalisation to new wording.

The same stories appear in role-conditioned chat prompts (``ROLE_SYSTEM_PROMPTS``, ``to_messages``)
so that multi-agent prompts (planner / critic / refiner / judger, experts + summarizer, see
LatentMAS) are in-distribution for the built-in models.

Example:
```python
from eval.tasks.arith_data import extract_boxed_int, make_problems, to_messages

problem = make_problems(1, seed=0, split="heldout")[0]
messages = to_messages(problem, role="critic", context="23 + 12 = 35.")
assert extract_boxed_int(problem.solution) == problem.answer
```
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

__all__ = [
    "ArithProblem",
    "CONTEXT_KINDS",
    "HELDOUT_NOUNS",
    "HELDOUT_TEMPLATES",
    "ROLE_SYSTEM_PROMPTS",
    "SCENE_PREFIXES",
    "TRAIN_NOUNS",
    "TRAIN_TEMPLATES",
    "check_problem",
    "extract_boxed_int",
    "make_context",
    "make_problems",
    "to_messages",
]

# Number ranges. Small on purpose: operands <= 50 and running totals < 1000 keep every
# line a 1-3 digit computation that a tiny model can learn.
MAX_OPERAND = 50
MAX_START = 50
MIN_START = 5
MUL_FACTORS = (2, 3, 4, 5)
MAX_MUL_BASE = 30  # multiply only small totals, so results stay <= 150
MAX_TOTAL = 999
MAX_STEPS = 4


@dataclass
class ArithProblem:
    """One word problem with its worked solution and the integer answer (checked by recomputation)."""

    question: str
    solution: str
    answer: int
    template_id: str
    n_steps: int


@dataclass(frozen=True)
class _Template:
    """A story frame: its opening sentence and question wording; the noun is drawn per problem."""

    start: str  # "{P}" = person, "{n}" = start amount, "{noun}"
    question: str


# Train and held-out splits share no story frame and no noun, so a held-out problem is new wording end
# to end (only the operation verbs and names are shared). Training frames are composed from many
# openings, optional scene prefixes and question forms (about 2,700 surface frames), because a tiny model
# trained on a handful of fixed frames learns the frames, not the reading: the first shipped model
# (9 frames) solved 94% of new problems in training wordings but 28% in held-out ones, mostly by
# running past the last operation when the question did not start with "How many". The held-out
# frames' scene ("On the beach"), opening verb ("collects", "has a box with"), and question wordings
# ("What is the final number of", "after all this") occur nowhere in training.
TRAIN_NOUNS = (
    "apples", "marbles", "coins", "books", "stickers", "cookies", "stamps", "balloons", "eggs", "toys",
    "cups", "rocks", "buttons", "beads", "candies", "oranges", "grapes", "pens", "hats", "bottles",
    "flowers", "seeds", "nuts", "bricks", "tickets", "plums", "socks", "blocks", "cakes", "leaves",
    "pencils", "crayons", "muffins", "pears", "peaches", "cherries", "carrots", "potatoes", "onions",
    "melons", "bananas", "jars", "mugs", "corks", "bowls", "plates", "spoons", "forks", "candles",
    "kites", "drums", "bells", "rings", "coats", "shoes", "gloves", "scarves", "shirts", "dolls",
    "puzzles", "games", "letters", "postcards", "photos", "paints", "brushes", "nails", "screws", "tools",
    "lamps", "chairs", "tables", "pillows", "blankets", "towels", "baskets", "buckets", "stones", "pebbles",
    "acorns", "pinecones", "sticks", "logs", "wreaths", "tiles", "beans", "peas", "rolls", "pies",
    "tarts", "donuts", "lollipops", "gumballs", "walnuts", "almonds", "figs", "limes", "kiwis", "berries",
)  # fmt: skip
HELDOUT_NOUNS = ("shells", "cards", "feathers", "lemons", "keys", "ribbons")

# Openings carry the start amount; those starting with "{P}" may take a scene prefix.
_TRAIN_OPENINGS = {
    "has": "{P} has {n} {noun}.",
    "jar": "{P} keeps {n} {noun} in a jar.",
    "day": "{P} starts the day with {n} {noun}.",
    "shelf": "A shelf in {P}'s room holds {n} {noun}.",
    "owns": "{P} owns {n} {noun}.",
    "bag": "There are {n} {noun} in {P}'s bag.",
    "holds": "{P} holds {n} {noun}.",
    "farm": "A basket on {P}'s farm has {n} {noun}.",
    "count": "{P} counts {n} {noun}.",
    "picks": "{P} picks {n} {noun}.",
    "brings": "{P} brings {n} {noun} along.",
    "pile": "{P} gathers {n} {noun} in a pile.",
    "saved": "{P} has saved {n} {noun}.",
    "first": "At first, {P} has {n} {noun}.",
    "given": "{P} was given {n} {noun}.",
    "made": "{P} made {n} {noun}.",
    "store": "The store puts {n} {noun} aside for {P}.",
    "begins": "{P} begins with {n} {noun}.",
}
SCENE_PREFIXES = (
    "In the morning, ", "At the party, ", "After school, ", "On Monday, ", "In the park, ",
    "At home, ", "During the trip, ", "At the market, ", "In the garden, ", "Before lunch, ",
)  # fmt: skip
_TRAIN_QUESTIONS = {
    "have_now": "How many {noun} does {P} have now?",
    "have_left": "How many {noun} does {P} have left?",
    "there_end": "How many {noun} are there at the end?",
    "are_left": "How many {noun} are left?",
    "remain": "How many {noun} remain?",
    "end_with": "What number of {noun} does {P} end with?",
    "count_now": "What is the count of {noun} now?",
    "find": "Find the number of {noun} {P} has in the end.",
    "now_how": "Now, how many {noun} are there?",
    "tell": "Can you tell how many {noun} {P} has?",
    "count_end": "Count the {noun} at the end.",
    "at_end": "At the end, how many {noun} does {P} have?",
    "total": "What is {P}'s total of {noun} in the end?",
    "so": "So how many {noun} does {P} hold?",
    "compute": "Compute how many {noun} there are now.",
}
TRAIN_TEMPLATES: dict[str, _Template] = {
    f"{o}/{q}": _Template(opening, question)
    for o, opening in _TRAIN_OPENINGS.items()
    for q, question in _TRAIN_QUESTIONS.items()
}
HELDOUT_TEMPLATES: dict[str, _Template] = {
    "beach": _Template("On the beach, {P} collects {n} {noun}.", "What is the final number of {noun}?"),
    "box": _Template("{P} has a box with {n} {noun}.", "How many {noun} are in the box after all this?"),
}

NAMES = ("Tom", "Ann", "Ben", "Mia", "Sam", "Lily", "Max", "Emma", "Leo", "Zoe", "Noah", "Ava")

# Operation wordings shared by all templates: the verbs carry the operation, the noun is the template's.
_ADD_PHRASES = (
    "{P} gets {k} more {noun}.",
    "{P} buys {k} more {noun}.",
    "{P} finds {k} more {noun}.",
    "{F} gives {P} {k} {noun}.",
    "Then {P} receives {k} {noun}.",
    "{P} makes {k} more {noun}.",
    "{P} wins {k} more {noun}.",
    "Later, {F} hands {P} {k} more {noun}.",
)
_SUB_PHRASES = (
    "{P} gives {k} {noun} to {F}.",
    "{P} loses {k} {noun}.",
    "{P} sells {k} {noun}.",
    "Then {k} {noun} are taken away.",
    "{P} uses {k} of the {noun}.",
    "{P} eats {k} {noun}.",
    "{F} takes {k} {noun} from {P}.",
    "Then {P} throws away {k} {noun}.",
)
_MUL_PHRASES = {
    2: ("The number of {noun} doubles.", "{P} ends up with twice as many {noun}."),
    3: ("The number of {noun} triples.", "{P} ends up with three times as many {noun}."),
    4: ("{P} ends up with four times as many {noun}.",),
    5: ("{P} ends up with five times as many {noun}.",),
}
_DISTRACTORS = (
    "{P} is {d} years old.",
    "{F} has {d} friends.",
    "The shop is {d} meters away.",
    "It is {d} degrees outside.",
    "{F} reads {d} pages.",
    "The bus comes at {d} minutes past noon.",
    "{F} walks {d} steps.",
    "The room has {d} windows.",
    "{P}'s cat sleeps {d} hours.",
)

_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}
_OP_WORD = {"add": "add", "sub": "subtract", "mul": "multiply by"}


def _apply(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    raise ValueError(f"unknown operation {op!r}")


def _rng_for(seed: int, split: str, index: int) -> random.Random:
    # Per-index RNG: make_problems(n, s)[:k] == make_problems(k, s), and splits never share a stream.
    return random.Random(f"arith|{split}|{seed}|{index}")


def _pick_ops(rng: random.Random, n_steps: int, start: int) -> list[tuple[str, int, int, int]]:
    """Sample (op, a, b, result) lines that keep every total in [0, MAX_TOTAL]."""
    lines = []
    cur = start
    for _ in range(n_steps):
        choices = ["add", "add", "sub", "sub"]
        if cur <= MAX_MUL_BASE:
            choices.append("mul")
        if cur < 2:
            choices = [c for c in choices if c != "sub"]
        op = rng.choice(choices)
        if op == "add":
            k = rng.randint(2, MAX_OPERAND)
        elif op == "sub":
            k = rng.randint(1, min(cur, MAX_OPERAND))
        else:
            k = rng.choice(MUL_FACTORS)
        new = _apply(op, cur, k)
        if not 0 <= new <= MAX_TOTAL:  # cannot happen with the ranges above; guard for edits
            raise AssertionError(f"total {new} left the range [0, {MAX_TOTAL}]")
        lines.append((op, cur, k, new))
        cur = new
    return lines


def _format_line(op: str, a: int, b: int, c: int) -> str:
    return f"{a} {_OP_SYMBOL[op]} {b} = {c}."


def _make_one(
    rng: random.Random,
    template_id: str,
    tpl: _Template,
    noun: str,
    n_steps: int,
    scenes: tuple[str, ...] = (),
) -> ArithProblem:
    person = rng.choice(NAMES)
    friend = rng.choice([n for n in NAMES if n != person])
    start = rng.randint(MIN_START, MAX_START)
    lines = _pick_ops(rng, n_steps, start)
    fill = {"P": person, "F": friend, "noun": noun}
    op_sentences = []
    for op, _a, k, _c in lines:
        phrase = rng.choice(_MUL_PHRASES[k] if op == "mul" else _ADD_PHRASES if op == "add" else _SUB_PHRASES)
        op_sentences.append(phrase.format(k=k, **fill))
    opening = tpl.start.format(n=start, **fill)
    if scenes and tpl.start.startswith("{P}") and rng.random() < 0.3:
        opening = rng.choice(scenes) + opening
    sentences = [opening] + op_sentences
    # 0-2 distractors, inserted anywhere after the opening sentence; their numbers are never used.
    for _ in range(rng.choice((0, 1, 1, 2))):
        d = rng.choice(_DISTRACTORS).format(d=rng.randint(2, 60), **fill)
        sentences.insert(rng.randint(1, len(sentences)), d)
    question = " ".join(sentences) + " " + tpl.question.format(**fill)
    answer = lines[-1][3]
    solution = "\n".join(_format_line(*ln) for ln in lines) + f"\n\\boxed{{{answer}}}"
    return ArithProblem(question, solution, answer, template_id, n_steps)


def make_problems(
    n: int, seed: int, split: str = "train", steps: tuple[int, ...] = (2, 3)
) -> list[ArithProblem]:
    """Generate ``n`` problems; step counts cycle through ``steps`` so each count is equally frequent.

    ``split="train"`` uses ``TRAIN_TEMPLATES`` and ``TRAIN_NOUNS``; ``split="heldout"`` uses
    ``HELDOUT_TEMPLATES``, ``HELDOUT_NOUNS`` and a separate random stream, so the splits never share a
    problem, a story frame or a noun. Prefix-stable: the first ``k``
    problems of ``make_problems(n, seed)`` equal ``make_problems(k, seed)``.
    """
    if split not in ("train", "heldout"):
        raise ValueError(f"`split` must be 'train' or 'heldout', got {split!r}.")
    if n < 0:
        raise ValueError(f"`n` must be >= 0, got {n}.")
    if not steps or any(not isinstance(s, int) or not 1 <= s <= MAX_STEPS for s in steps):
        raise ValueError(f"`steps` must be a non-empty tuple of ints in [1, {MAX_STEPS}], got {steps!r}.")
    templates = TRAIN_TEMPLATES if split == "train" else HELDOUT_TEMPLATES
    nouns = TRAIN_NOUNS if split == "train" else HELDOUT_NOUNS
    ids = sorted(templates)
    out = []
    for i in range(n):
        rng = _rng_for(seed, split, i)
        tid = rng.choice(ids)
        scenes = SCENE_PREFIXES if split == "train" else ()
        out.append(_make_one(rng, tid, templates[tid], rng.choice(nouns), steps[i % len(steps)], scenes))
    return out


_LINE_RE = re.compile(r"^(\d+) ([+\-*]) (\d+) = (\d+)\.$")
_BOXED_RE = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


def extract_boxed_int(text: str) -> int | None:
    """Return the integer in the last ``\\boxed{...}`` of ``text``, or None if there is none."""
    matches = _BOXED_RE.findall(text)
    return int(matches[-1]) if matches else None


def check_problem(problem: ArithProblem) -> bool:
    """Recompute every solution line and the boxed answer; True only if all of them agree."""
    *body, last = problem.solution.split("\n")
    if len(body) != problem.n_steps or extract_boxed_int(last) != problem.answer:
        return False
    prev = None
    for line in body:
        m = _LINE_RE.match(line)
        if m is None:
            return False
        a, sym, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
        op = {"+": "add", "-": "sub", "*": "mul"}[sym]
        if _apply(op, a, b) != c or (prev is not None and a != prev):
            return False
        prev = c
    return prev == problem.answer


# Short prompts on purpose: every prompt token costs training time on two CPU cores.
ROLE_SYSTEM_PROMPTS: dict[str, str] = {
    "solver": "You are a careful solver. Solve the problem step by step and put the final answer in \\boxed{}.",
    "planner": "You are the planner. Plan the steps that solve the problem, one line per step, "
    "and put the result in \\boxed{}.",
    "critic": "You are the critic. Check the previous work, fix any mistake, and give the corrected "
    "steps with the answer in \\boxed{}.",
    "refiner": "You are the refiner. Turn the plan and feedback into a final step-by-step solution "
    "with the answer in \\boxed{}.",
    "judger": "You are the judger. Use earlier agents' work only if it helps, reason step by step, "
    "and put the final answer in \\boxed{}.",
    "math_expert": "You are a math expert. Solve the problem step by step and put the final answer in \\boxed{}.",
    "science_expert": "You are a science expert. Solve the problem step by step and put the final "
    "answer in \\boxed{}.",
    "code_expert": "You are a code expert. Solve the problem step by step and put the final answer in \\boxed{}.",
    "summarizer": "You are the summarizer. Use the previous agents' answers as reference and give "
    "the final step-by-step solution with the answer in \\boxed{}.",
}

CONTEXT_KINDS = ("hint", "draft", "wrong_draft")


def make_context(problem: ArithProblem, kind: str, rng: random.Random) -> str:
    """Build what a previous agent might pass on: an operation plan, a correct draft, or a flawed one.

    ``wrong_draft`` changes one line's result by a small amount (and carries the error forward), so a
    model trained to answer correctly after it learns to recompute rather than copy. The changed result
    is clamped at 0, so about 1.5% of wrong drafts come out correct and a few percent reach negative
    numbers in later lines; the shipped model was trained on exactly this generator.
    """
    if kind not in CONTEXT_KINDS:
        raise ValueError(f"`kind` must be one of {CONTEXT_KINDS}, got {kind!r}.")
    body = problem.solution.split("\n")[:-1]
    parsed = [_LINE_RE.match(line) for line in body]
    if kind == "hint":
        sym2op = {"+": "add", "-": "sub", "*": "mul"}
        parts = [f"{_OP_WORD[sym2op[m[2]]]} {m[3]}" for m in parsed if m]
        return f"Plan: start with {parsed[0][1]}, then " + ", then ".join(parts) + "."
    if kind == "draft":
        return problem.solution
    # wrong_draft: perturb one result, propagate it through the following lines.
    j = rng.randrange(len(parsed))
    lines, cur = [], None
    for i, m in enumerate(parsed):
        a, sym, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
        if cur is not None:
            a = cur
            c = {"+": a + b, "-": a - b, "*": a * b}[sym]
        if i == j:
            c = max(0, c + rng.choice((-10, -2, -1, 1, 2, 10)))
        lines.append(f"{a} {sym} {b} = {c}.")
        cur = c
    return "\n".join(lines) + f"\n\\boxed{{{cur}}}"


def to_messages(problem: ArithProblem, role: str = "solver", context: str | None = None) -> list[dict]:
    """Render ``problem`` as chat messages: the role's system prompt, then the user turn.

    ``context`` (a hint or a draft from a previous agent) goes into the user turn after the question.
    The assistant turn is not included: append ``{"role": "assistant", "content": problem.solution}``
    for training.
    """
    if role not in ROLE_SYSTEM_PROMPTS:
        raise ValueError(f"unknown `role` {role!r}; choose one of {sorted(ROLE_SYSTEM_PROMPTS)}.")
    user = problem.question
    if context is not None:
        if not isinstance(context, str):
            raise ValueError(f"`context` must be a string or None, got {type(context).__name__}.")
        user = f"{user}\n\nFrom a previous agent:\n{context}"
    return [{"role": "system", "content": ROLE_SYSTEM_PROMPTS[role]}, {"role": "user", "content": user}]


def solution_signature(problem: ArithProblem) -> tuple[tuple[int, str, int, int], ...]:
    """The numbers and operations of the target solution, line by line: two problems with the same
    signature have the same answer-determining content, whatever their wording."""
    out = []
    for line in problem.solution.splitlines():
        m = _LINE_RE.match(line.strip())
        if m:
            out.append((int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))))
    return tuple(out)


# the held-out seeds `latentworks eval/demo`, bench/studies/latent_mas.py and train_mas score
EVAL_SEEDS = (0, 2024)
EVAL_N = 1024  # held-out problems per seed whose signatures training must avoid


def eval_signatures(seeds: tuple[int, ...] = EVAL_SEEDS, n: int = EVAL_N) -> set:
    """Signatures of the held-out problems the project evaluates on (every step count 1-4)."""
    sigs = set()
    for seed in seeds:
        for steps in ((2, 3), (1, 2, 3, 4)):
            sigs |= {solution_signature(p) for p in make_problems(n, seed, "heldout", steps)}
    return sigs


def signature_disjoint_train(n: int, seed: int, steps: tuple[int, ...] = (1, 2, 3, 4)) -> list[ArithProblem]:
    """`n` train-split problems none of whose solutions has an evaluated problem's signature."""
    banned = eval_signatures()
    out, k = [], 0
    while len(out) < n:
        batch = make_problems(max(2 * n, 64), seed + 7919 * k, "train", steps)
        out.extend(p for p in batch if solution_signature(p) not in banned)
        k += 1
    return out[:n]
