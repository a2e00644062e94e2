"""Tests of the synthetic arithmetic corpus: splits, ground truth, formats and role prompts."""

import random
import re

import pytest

from eval.tasks.arith_data import (
    CONTEXT_KINDS,
    HELDOUT_NOUNS,
    HELDOUT_TEMPLATES,
    ROLE_SYSTEM_PROMPTS,
    TRAIN_TEMPLATES,
    ArithProblem,
    check_problem,
    extract_boxed_int,
    make_context,
    make_problems,
    to_messages,
)

EXPECTED_ROLES = {
    "solver", "planner", "critic", "refiner", "judger", "math_expert", "science_expert", "code_expert", "summarizer",
}  # fmt: skip
LINE = re.compile(r"^(\d+) ([+\-*]) (\d+) = (\d+)\.$")


def _recompute(problem: ArithProblem) -> int:
    """Independent recomputation: parse every line, redo its arithmetic, check the chain and the numbers."""
    body = problem.solution.split("\n")[:-1]
    question_numbers = [int(x) for x in re.findall(r"\d+", problem.question)]
    cur = None
    for line in body:
        a, op, b, c = LINE.match(line).groups()
        a, b, c = int(a), int(b), int(c)
        assert cur is None or a == cur, f"line {line!r} does not continue from {cur}"
        if cur is None:
            assert a == question_numbers[0], "the first line must start from the opening amount"
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        assert value == c, f"wrong arithmetic in {line!r}"
        if op != "*":  # multipliers are written as words ("doubles"); other operands appear as digits
            assert b in question_numbers[1:]
        assert 0 <= value < 1000 and b <= 50
        cur = value
    return cur


def test_splits_disjoint_by_template_and_question():
    """Held-out problems use templates and question strings that never occur in the train split."""
    assert not set(TRAIN_TEMPLATES) & set(HELDOUT_TEMPLATES)
    train = make_problems(400, seed=0, split="train", steps=(1, 2, 3, 4))
    held = make_problems(400, seed=0, split="heldout", steps=(1, 2, 3, 4))
    assert {p.template_id for p in train} <= set(TRAIN_TEMPLATES)
    assert {p.template_id for p in held} <= set(HELDOUT_TEMPLATES)
    assert not {p.question for p in train} & {p.question for p in held}
    held_nouns = set(HELDOUT_NOUNS)
    assert not any(noun in p.question for p in train for noun in held_nouns)


def test_answers_verified_by_recomputation():
    """Every solution line is correct arithmetic chained from the opening amount; the boxed answer is the result."""
    for split in ("train", "heldout"):
        for p in make_problems(300, seed=3, split=split, steps=(1, 2, 3, 4)):
            assert _recompute(p) == p.answer
            assert check_problem(p)
            assert len(p.solution.split("\n")) == p.n_steps + 1


def test_check_problem_rejects_a_wrong_solution():
    """check_problem is not vacuous: one wrong digit makes it fail."""
    p = make_problems(1, seed=1)[0]
    wrong = ArithProblem(p.question, p.solution.replace(f"{{{p.answer}}}", f"{{{p.answer + 1}}}"), p.answer,
                         p.template_id, p.n_steps)  # fmt: skip
    assert not check_problem(wrong)


def test_solutions_end_in_boxed_and_steps_cycle():
    """Solutions end with \\boxed{answer}; step counts cycle through `steps`; generation is prefix-stable."""
    probs = make_problems(30, seed=5, split="heldout", steps=(2, 3))
    assert all(re.search(r"\\boxed\{\d+\}$", p.solution) for p in probs)
    assert [p.n_steps for p in probs] == [2, 3] * 15
    assert make_problems(7, seed=5, split="heldout", steps=(2, 3)) == probs[:7]
    assert make_problems(7, seed=6, split="heldout", steps=(2, 3)) != probs[:7]


def test_distractors_present():
    """Some questions carry extra numbers that the solution never uses."""
    probs = make_problems(200, seed=2, steps=(2, 3))
    extra = [p for p in probs if len(re.findall(r"\d+", p.question)) > p.n_steps + 1]
    assert 0.3 < len(extra) / len(probs) < 0.95


def test_extract_boxed_int():
    """The last boxed integer wins; no box or a non-integer gives None."""
    assert extract_boxed_int("1 + 2 = 3.\n\\boxed{3}") == 3
    assert extract_boxed_int("\\boxed{1} then \\boxed{ 42 }") == 42
    assert extract_boxed_int("\\boxed{-7}") == -7
    assert extract_boxed_int("no answer") is None
    assert extract_boxed_int("\\boxed{x}") is None


def test_every_role_renders_with_the_chat_template():
    """All nine roles render through the project tokenizer, with and without context."""
    from latent.tokenizer import train_chat_tokenizer

    assert set(ROLE_SYSTEM_PROMPTS) == EXPECTED_ROLES
    p = make_problems(1, seed=0)[0]
    tok = train_chat_tokenizer([p.question, p.solution], vocab_size=300)
    for role in ROLE_SYSTEM_PROMPTS:
        for ctx in (None, "Plan: add 3."):
            msgs = to_messages(p, role, ctx)
            assert [m["role"] for m in msgs] == ["system", "user"]
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            assert ROLE_SYSTEM_PROMPTS[role] in text and p.question in text
            assert text.endswith("<|im_start|>assistant\n")
            assert (ctx in text) if ctx else ("From a previous agent" not in text)


def test_contexts():
    """Hints name the operations, drafts equal the solution, wrong drafts (nearly always) box a wrong answer."""
    rng = random.Random(0)
    problems = make_problems(400, seed=4, steps=(2, 3))
    wrong_answers = 0
    for p in problems:
        assert make_context(p, "draft", rng) == p.solution
        assert make_context(p, "hint", rng).startswith("Plan: start with")
        wrong_answers += extract_boxed_int(make_context(p, "wrong_draft", rng)) != p.answer
    assert wrong_answers / len(problems) > 0.95  # the clamp at 0 leaves ~1.5% of wrong drafts correct
    assert set(CONTEXT_KINDS) == {"hint", "draft", "wrong_draft"}


def test_bad_inputs_raise():
    """Invalid split, steps, n, role, context kind and context type raise ValueError naming the argument."""
    p = make_problems(1, seed=0)[0]
    with pytest.raises(ValueError, match="split"):
        make_problems(1, seed=0, split="test")
    with pytest.raises(ValueError, match="steps"):
        make_problems(1, seed=0, steps=(5,))
    with pytest.raises(ValueError, match="steps"):
        make_problems(1, seed=0, steps=())
    with pytest.raises(ValueError, match="`n`"):
        make_problems(-1, seed=0)
    with pytest.raises(ValueError, match="role"):
        to_messages(p, role="poet")
    with pytest.raises(ValueError, match="context"):
        to_messages(p, context=3)
    with pytest.raises(ValueError, match="kind"):
        make_context(p, "essay", random.Random(0))
