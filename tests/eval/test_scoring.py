"""Answer extraction and scoring on tricky, real-world-looking model outputs."""

from __future__ import annotations

import pytest

from eval.scoring import (
    Score,
    extract_boxed,
    extract_choice,
    extract_code,
    extract_math_answer,
    math_equal,
    normalize_number,
    score,
)
from eval.tasks import Item


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The answer is \boxed{42}.", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"first \boxed{3} then corrected: \boxed{\dfrac{\sqrt{3}}{2}}", r"\dfrac{\sqrt{3}}{2}"),  # last box
        (r"\boxed{\text{(B)}}", r"\text{(B)}"),
        (r"\fbox{7}", "7"),
        (r"\boxed 5 is it", "5"),  # no braces
        (r"ok \boxed{12} then truncated \boxed{\frac{1", "12"),  # unclosed last box is skipped
        (r"\boxed{a \{b\} c}", r"a \{b\} c"),  # escaped braces do not close the box
        ("no box here", None),
    ],
)
def test_extract_boxed(text, expected):
    """The last complete \\boxed/\\fbox with balanced (nested, escaped) braces is returned."""
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1,234", "1234"),
        ("$5.00", "5"),
        (r"\$1,000,000", "1000000"),
        ("-3", "-3"),
        ("−3", "-3"),  # unicode minus
        ("+7", "7"),
        ("18.0", "18"),
        ("0.50", "1/2"),
        ("3/4", "3/4"),
        (r"\frac{3}{4}", "3/4"),
        (r"\dfrac{6}{8}", "3/4"),
        (r"-\frac{1}{2}", "-1/2"),
        (r"\frac12", "1/2"),
        ("12 cm", "12"),
        (r"12\text{ cm}", "12"),
        (r"50\%", "50"),
        ("90^\\circ", "90"),
        ("x = 5", "5"),
        ("1e3", "1000"),
        ("18 dollars.", "18"),
        ("033", "33"),  # AIME pads to three digits
        ("2, 3", None),  # a tuple is not one number
        (r"\sqrt{2}", None),
        ("seven", "7"),  # number words are numbers
        ("one of them", None),
    ],
)
def test_normalize_number(raw, expected):
    """Numbers in prose and LaTeX map to one canonical exact form; non-numbers give None."""
    assert normalize_number(raw) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("1,000", "1000", True),
        ("18.0", "18", True),
        ("0.5", r"\frac{1}{2}", True),
        (r"\dfrac{3}{4}", "0.75", True),
        ("$5.00", "5", True),
        ("-3", "3", False),
        ("1", "1000", False),  # the official regex reads "1,000" as "1"; we must not
        (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}", True),  # needs math_verify
        (r"\sqrt{8}", r"2\sqrt{2}", True),
        ("(1, 2]", "(1,2]", True),
        ("x^2+2x+1", "(x+1)^2", True),
        ("x^2+1", "(x+1)^2", False),
        (None, "3", False),
    ],
)
def test_math_equal(pred, gold, equal):
    """Exact rational comparison first, then math_verify for symbolic answers."""
    assert math_equal(pred, gold) is equal


@pytest.mark.parametrize(
    ("text", "expected", "how"),
    [
        ("Step 1: 3+4=7. Step 2: 7*2=14.\n#### 14", "14", "####"),
        ("So the total is 1,234 apples. The answer is 1,234.", "1,234", "phrase"),
        ("Final answer: $5.00", "$5.00", "phrase"),
        ("We get 12, then 15, then 20", "20", "last number"),
        ("I do not know.", None, "nothing found"),
    ],
)
def test_math_fallbacks_without_a_box(text, expected, how):
    """Without a box: '####', then 'the answer is', then the last number."""
    assert extract_math_answer(text) == (expected, how)


def test_score_math_item():
    """`score` on math items uses the box, normalisation and the fallbacks."""
    item = Item("q1", "How much?", "1234", "math")
    assert score(item, r"Adding up: $\boxed{1{,}234}$") == Score(True, "1{,}234", "boxed")
    assert score(item, "The answer is 1,234 dollars.").correct
    assert not score(item, r"\boxed{1}, since 1,234 is wrong").correct  # the box wins over later text
    assert not score(item, "no idea").correct


CHOICES = ["Paris", "London", "Berlin", "Madrid"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is (C)", "C"),
        ("Answer: b", "B"),
        ("answer: **D**", "D"),
        (r"Therefore \boxed{B}", "B"),
        (r"\boxed{\text{(A)}}", "A"),
        (r"\boxed{Berlin}", "C"),  # option text in the box
        ("After weighing them all...\n\nB.", "B"),
        ("Hmm, London is big, but the correct option is A", "A"),
        ("The answer is Madrid.", "D"),  # option text after 'answer'
        ("The answer is a bit tricky; (B)", "B"),  # 'a' is an article, not option A
        ("The correct answer is E", None),  # only 4 options
        ("I cannot decide.", None),
    ],
)
def test_extract_choice(text, expected):
    """Letters in many spellings, and option text, map to the upper-case option letter."""
    assert extract_choice(text, CHOICES) == expected


def test_score_mc_item_uses_gold_letter():
    """MC scoring compares letters case-insensitively with the gold."""
    item = Item("m1", "Capital of France?", "a", "mc", choices=CHOICES)
    assert score(item, "The answer is (A).").correct
    assert not score(item, "The answer is (B).").correct


def test_extract_code_takes_the_last_python_block():
    """With several fenced blocks the last python one wins; untagged blocks are a fallback."""
    text = (
        "First try:\n```python\ndef f():\n    return 1\n```\nFixed:\n```python\ndef f():\n    return 2\n```\n"
    )
    assert extract_code(text) == "def f():\n    return 2\n"
    text = "```python\ndef f():\n    return 1\n```\nOutput:\n```text\n1\n```"
    assert extract_code(text) == "def f():\n    return 1\n"  # a later non-python block is ignored
    assert extract_code("```\ndef g(x):\n    return x\n```") == "def g(x):\n    return x\n"


def test_extract_code_unclosed_fence_and_def_heuristic():
    """A truncated last fence still counts; without fences a def block is cut out of the prose."""
    assert extract_code("```python\ndef f(x):\n    return x + 1\n") == "def f(x):\n    return x + 1\n"
    text = "Sure! Here it is:\nimport math\ndef area(r):\n    return math.pi * r * r\nThis computes the area."
    assert extract_code(text) == "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert extract_code("Just prose, no code.") is None


def _code_item() -> Item:
    tests = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n\ncheck(add)\n"
    prompt = 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n'
    return Item("c1", prompt, "", "code", tests=tests, entry_point="add", meta={"prompt": prompt})


def test_score_code_runs_tests_in_the_sandbox():
    """Correct code passes; wrong code, crashing code and a loop fail with a reason."""
    item = _code_item()
    good = score(item, "```python\ndef add(a, b):\n    return a + b\n```")
    assert good.correct and good.detail == "ok" and (good.tests_passed, good.tests_total) == (2, 2)
    body_only = score(item, "```python\n    return a + b\n```")  # completion of the prompt's body
    assert body_only.correct
    wrong = score(item, "```python\ndef add(a, b):\n    return a - b\n```")
    assert not wrong.correct and "AssertionError" in wrong.detail and wrong.tests_passed == 0
    loop = score(item, "```python\ndef add(a, b):\n    while True:\n        pass\n```", sandbox_timeout=1)
    assert not loop.correct and "time limit" in loop.detail
    assert score(item, "I would add them.") == Score(False, None, "no code found")


def test_code_never_runs_in_our_process():
    """A candidate that exits early scores wrong (the tests never ran), and our process is untouched."""
    item = _code_item()
    result = score(item, "```python\nimport os\nos._exit(0)\n```")
    assert not result.correct  # an exit code 0 is no longer a pass: the judge saw no test pass
    marker = score(
        item,
        "```python\nimport sys\nsys.modules['builtins'].LW_MARK = 1\ndef add(a, b):\n    return a+b\n```",
    )
    import builtins

    assert marker.correct and not hasattr(builtins, "LW_MARK")


def test_score_never_raises_on_bad_input():
    """Unknown kinds, non-string outputs and code items without tests are scored wrong with a reason."""
    unknown = score(Item("x", "q", "1", "essay"), "1")
    assert not unknown.correct and "kind" in unknown.detail
    not_str = score(Item("x", "q", "1", "math"), None)
    assert not not_str.correct and "not a str" in not_str.detail
    no_tests = score(Item("x", "q", "", "code", entry_point="f"), "```python\ndef f():\n    pass\n```")
    assert not no_tests.correct and "no `tests`" in no_tests.detail


@pytest.mark.parametrize(
    "text, gold",
    [
        ("The final answer to the given arithmetic problem is -4.", "-4"),
        ("The answer to 12 - 5 is 7 apples.", "7"),
        ("So the final answer for this problem: 15", "15"),
    ],
)
def test_answer_phrase_with_words_before_the_value(text, gold):
    """'final answer to <what> is X': the value after the inner 'is', not the whole phrase."""
    from eval.scoring import extract_math_answer, math_equal

    ans, how = extract_math_answer(text)
    assert how == "phrase" and math_equal(ans, gold), (ans, how)
