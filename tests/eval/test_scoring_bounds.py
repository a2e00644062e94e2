"""Every scoring step is bounded on hostile text (main thread and worker threads), and the extraction
cases a careful reader decides differently from a naive rule."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from bench.studies.hostile_corpus import corpus
from eval.sandbox import run_python
from eval.scoring import (
    extract_boxed,
    extract_choice,
    extract_code,
    extract_math_answer,
    math_equal,
    normalize_number,
    score,
)
from eval.scoring.symbolic import symbolic_equal
from eval.tasks import Item

LIMIT_S = 2.0
# the candidate's own CPU time, not ours: covered by test_code_redteam.test_huge_int_reply_fails_fast
CASES = [c for c in corpus() if c[0] != "code: 3M-digit reply"]


@pytest.fixture(scope="module", autouse=True)
def _helper_started():
    symbolic_equal("1", "1")  # the symbolic helper's one-time start is not a per-call cost


def _timed(item, text):
    start = time.perf_counter()
    s = score(item, text, sandbox_timeout=1.0)
    return time.perf_counter() - start, s


@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c[0] for c in CASES])
def test_hostile_output_scores_within_the_limit(idx, where):
    name, item, text = CASES[idx]
    if where == "main":
        took, s = _timed(item, text)
    else:
        out = []
        t = threading.Thread(target=lambda: out.append(_timed(item, text)))
        t.start()
        t.join(30)
        assert out, f"{name}: still running after 30 s in a worker thread"
        took, s = out[0]
    assert took < LIMIT_S, (name, where, took, s.detail)
    assert not s.detail.startswith("scoring failed"), (name, s.detail)  # no crash swallowed


def test_host_memory_stays_bounded():
    """The heaviest outputs, scored in a fresh process: its peak RSS stays under 500 MiB."""
    code = (
        "import json\nfrom bench.studies.hostile_corpus import corpus\nfrom bench.studies.scoring_hostile import peak_rss_mib\n"
        "from eval.scoring import score\n"
        "for name, item, text in corpus():\n    score(item, text, sandbox_timeout=1.0)\n"
        "print(json.dumps(peak_rss_mib()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=".")
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) < 500


def test_symbolic_blowups_are_killed_off_the_main_thread():
    """sympy on (99!)! runs in C for minutes; the helper kills it, from a worker thread too."""
    got = []
    t = threading.Thread(target=lambda: got.append((time.perf_counter(), symbolic_equal("(99!)!", "5"))))
    start = time.perf_counter()
    t.start()
    t.join(10)
    assert got and got[0][1] is None and got[0][0] - start < LIMIT_S, got
    assert symbolic_equal("\\sqrt{2}/2", "\\frac{1}{\\sqrt{2}}") is True  # and it still works after


def test_linear_scans():
    """The scans that were quadratic: answer phrase, code fences, entry-point search."""
    start = time.perf_counter()
    extract_math_answer("The answer is " + "is " * 100_000)
    extract_math_answer("The answer is " + "ab " * 33_000)
    extract_code("`" * 400_000)
    extract_code("```python\n" + "\n" * 200_000 + "def f(): pass\n```")
    assert time.perf_counter() - start < LIMIT_S


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Option A is incorrect. Option B is incorrect.", None),
        ("Option A is incorrect. Option B is correct.", "B"),
        ("A is wrong, so the answer is D.", "D"),
        ("I think the answer is C, not B.", "C"),
        ("B) is ruled out.\nC is not right either.", None),
        ("Option B is not correct", None),
        ("\\boxed{\\text{(B) } 12}", "B"),
    ],
)
def test_rejected_options_are_no_commitment(text, expected):
    assert extract_choice(text, ["10", "12", "14", "16"]) == expected


def test_labelled_option_value_in_a_box_is_the_number():
    ans, _ = extract_math_answer("So \\boxed{\\text{(B) } 12}.")
    assert math_equal(ans, "12") and not math_equal("A.5", "5")


def test_a_lone_sign_is_not_a_crash():
    s = score(CASES[0][1], "answer: " + "-" * 1000)
    assert not s.correct and not s.detail.startswith("scoring failed"), s


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"timeout": float("inf")}, "timeout"),
        ({"memory_mb": 1e30}, "memory_mb"),
        ({"timeout": float("nan")}, "timeout"),
    ],
)
def test_infinite_or_absurd_limits_raise_value_error(kwargs, name):
    with pytest.raises(ValueError, match=name):
        run_python("pass", **kwargs)


def test_python_in_an_answer_never_reaches_the_symbolic_parser(tmp_path):
    target = tmp_path / "ran"
    code = list(f"__import__('os').system('touch {target}')".encode())
    for text in (
        f"\\boxed{{__import__('os').system('touch {target}')}}",
        f'\\boxed{{open("{target}", "w")}}',
        f"\\boxed{{eval(bytes({code}).decode())}}".replace(" ", ""),  # no quotes, no dunder
    ):
        s = score(CASES[0][1], text)
        assert not s.correct and not target.exists(), (text, s)
    from eval.scoring.scorer import _symbolic_safe

    # math_verify does not evaluate this today; a Python call never reaches it in case a parser would
    assert not _symbolic_safe("eval(bytes([49,43,49]).decode())") and _symbolic_safe("\\frac{1}{\\sqrt{2}}")


# --------------------------------------------------------------------------- scans that were super-linear


@pytest.mark.parametrize(
    "case",
    [
        "phrase + newlines",
        "repeated signs",
        "nested boxes",
        "output over the size limit",
    ],
)
def test_scans_that_were_superlinear(case):
    """Each input here took 5 s or more before its fix (cubic `\\s*` backtracking before `(.+)`, one
    string copy per sign and per nested box, every `####` line of a 3 MB output read); now each is
    well under the limit."""
    start = time.perf_counter()
    if case == "phrase + newlines":
        assert extract_math_answer("answer" + "\n" * 1_500)[0] is None
    elif case == "repeated signs":
        assert normalize_number("-" * 99_999 + "1") == "-1"  # at the readers' size limit
    elif case == "nested boxes":
        assert extract_boxed("\\boxed{" * 12_000 + "1" + "}" * 12_000) == "1"  # under the size limit
    else:
        s = score(CASES[0][1], "#### x\n" * 500_000)
        assert not s.correct and "too long" in s.detail, s
    took = time.perf_counter() - start
    assert took < LIMIT_S, (case, took)


def test_a_commitment_reads_a_window_not_the_rest_of_the_text(monkeypatch):
    """Each commitment once copied the whole rest of the text to look at one word after its letter."""
    import eval.scoring.choice_extraction as ce

    seen = []
    real = ce._is_prose
    monkeypatch.setattr(
        ce, "_is_prose", lambda letter, marked, after: seen.append(len(after)) or real(letter, marked, after)
    )
    assert extract_choice("it is B " * 5_000, None) == "B"
    assert seen and max(seen) <= 100, max(seen)


@pytest.mark.parametrize(
    ("text", "gold", "correct"),
    [
        ("The answer is not 12.", "12", False),  # the negated value is no last-number fallback
        ("The answer isn't obvious. After checking every case we get 12.", "12", True),
        ("The answer is 12.\n\nThe answer is not given in the question.", "12", True),  # no number negated
        ("\\boxed{12 \\text{ or } 13}", "12", False),  # "or 13" is no unit
        ("\\boxed{12 and 13}", "12", False),
        ("\\boxed{\\text{12 or 13}}", "12", False),
        ("\\boxed{12 or more}", "12", False),
        ("\\boxed{1 2}", "12", False),  # two numbers, not 12
        ("\\boxed{[12]}", "12", False),  # a list is not the number (math_verify says equal)
        ("\\boxed{\\{12\\}}", "12", False),  # nor is a set
        ("\\boxed{1 000}", "1000", True),  # spaces between thousands
        ("\\boxed{12}\n\nActually, the answer is 13.", "12", False),  # the last commitment wins
        ("\\boxed{12}. So the answer is 12 apples.", "12", True),
        ("The answer is approximately 12.", "12", True),
        ("the answer is 12 (not 13)", "12", True),
        ("\\boxed{12 \\text{ cm}^2}", "12", True),
    ],
)
def test_math_cases_a_careful_reader_decides(text, gold, correct):
    assert score(Item("m", "q", gold, "math"), text).correct is correct, text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Options A, C and D are incorrect.", None),  # a list of rejected letters rejects the first too
        ("Both A and C are wrong. Answer: B", "B"),
        ("Options A and B are not correct.", None),
        ("\\boxed{B}\n\nActually, the answer is C.", "C"),  # a commitment after the box wins
        ("The answer is C. \\boxed{B}", "B"),
        ("I'm not sure, but I'd guess B.", "B"),
    ],
)
def test_choice_cases_a_careful_reader_decides(text, expected):
    assert (
        score(
            Item("c", "q", expected or "A", "mc", choices=["Paris", "London", "Berlin", "Madrid"]), text
        ).extracted
        == expected
    )


BIG = (
    "The answer is \\boxed{B}. The answer is 12. ```python\ndef f():\n    return 1\n```\n" * 150_000
)  # ~10 MB


@pytest.mark.parametrize(
    "read, nothing",
    [
        (lambda t: extract_math_answer(t)[0], None),
        (lambda t: extract_choice(t, ["1", "2", "3"]), None),
        (lambda t: extract_boxed(t), None),
        (lambda t: extract_code(t), None),
        (lambda t: normalize_number(t), None),
        (lambda t: math_equal(t, "12"), False),
    ],
    ids=[
        "extract_math_answer",
        "extract_choice",
        "extract_boxed",
        "extract_code",
        "normalize_number",
        "math_equal",
    ],
)
def test_public_readers_refuse_a_10_mb_text_at_once(read, nothing):
    """Each public reader has its own size guard (`MAX_OUTPUT_CHARS`), not only `score`: 10 MB is read
    as nothing, in well under the seconds a full scan takes."""
    assert len(BIG) > 10_000_000
    start = time.perf_counter()
    assert read(BIG) == nothing
    assert time.perf_counter() - start < 0.2


def test_the_math_reader_says_why_it_read_nothing():
    """The reason names the length and the limit, as `score` does."""
    answer, why = extract_math_answer(BIG)
    assert answer is None and "too long" in why and "100,000" in why


def test_the_choice_module_guards_its_own_entry():
    """`eval.scoring.choice_extraction.extract_choice`, called directly, is bounded the same way."""
    from eval.scoring.choice_extraction import extract_choice as raw_extract_choice

    start = time.perf_counter()
    assert raw_extract_choice(BIG, None) is None
    assert time.perf_counter() - start < 0.2
