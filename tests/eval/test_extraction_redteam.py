"""A careful reader's verdicts on tricky math and multiple-choice answers: the scorer may be stricter than
the reader (score a right output wrong, stated in eval/scoring/README.md), never more lenient."""

from __future__ import annotations

import pytest

from eval.scoring import extract_choice, score
from eval.tasks import Item

CH = ["Paris", "London", "Berlin", "Madrid"]
# (text, the letter a careful reader takes, None when the text commits to none)
MC = [
    ("Option A is incorrect. Option B is incorrect.", None),
    ("Option A is incorrect. Option B is incorrect. Option C is correct.", "C"),
    ("A is not right. B isn't either. So C.", "C"),
    ("The answer is not B.", None),
    ("It's not (B), it's (C).", "C"),
    ("I initially thought B, but the answer is C.", "C"),
    ("Answer: C\n\nWait, actually the answer is B.", "B"),
    ("The answer is (B).\nLet me double-check: Option A is wrong, option C is wrong.", "B"),
    ("B is incorrect because Paris is the capital. The answer is A.", "A"),
    ("\\boxed{\\text{(B) } London}", "B"),
    ("\\boxed{\\textbf{B}}", "B"),
    ("\\boxed{(B)}", "B"),
    ("\\boxed{B. London}", "B"),
    ("\\boxed{\\text{London}}", "B"),
    ("Final answer: **(B) London**", "B"),
    ("The correct answer is: B", "B"),
    ("Correct option is B", "B"),
    ("I'm not sure, but I'd guess B.", "B"),
    ("Neither A nor B is correct; the answer is D.", "D"),
    ("Both A and C are wrong. Answer: B", "B"),
    ("A and B are wrong.", None),
    ("Options A, C and D are incorrect.", None),
    ("The answer cannot be A.", None),
    ("The answer is definitely not A or C; it is B.", "B"),
    ("It could be A or B.", None),
    ("answer: b", "B"),
    ("Answer: (b)", "B"),
    ("The answer is B, not A.", "B"),
    ("Not A. Not C. Not D.", None),
    ("A? No. B? Yes.", "B"),
    ("Option B is false. Option C is true.", "C"),
    ("Option B is wrong; the right answer is C", "C"),
    ("I eliminate A, B and D.", None),
    ("(A) incorrect\n(B) incorrect\n(C) correct\n(D) incorrect", "C"),
    ("A: wrong\nB: wrong\nC: right\nD: wrong", "C"),
    ("The answer is E.", None),
    ("The answer is (E) none of the above", None),
    ("B) London", "B"),
    ("**Answer: B**", "B"),
    ("Answer: London", "B"),
    ("The capital is London, so B.", "B"),
    ("Answer:\n\nB", "B"),
    ("I would not pick A. I pick B.", "B"),
    ("Answer: B is incorrect.", None),
    ("The answer isn't A.", None),
    ("The best answer is not A.", None),
    ("The answer is A... no wait, it's B.", "B"),
]
# (text, gold, whether a careful reader marks it right)
MATH = [
    ("The answer is not 12.", "12", False),
    ("The answer is 12? No, it is 13.", "12", False),
    ("12 is wrong. The answer is 13.", "12", False),
    ("\\boxed{12} is incorrect; \\boxed{13}", "12", False),
    ("I get 12 or 13.", "12", False),
    ("The answer is between 11 and 13.", "12", False),
    ("The answer is approximately 12.", "12", True),
    ("The answer is 12.5", "12", False),
    ("The answer is 12.", "12", True),
    ("The answer is 1,2", "12", False),
    ("The answer is 12,000.", "12", False),
    ("\\boxed{12\\text{ apples}}", "12", True),
    ("\\boxed{x=12}", "12", True),
    ("\\boxed{12^\\circ}", "12", True),
    ("\\boxed{\\text{(B) } 12}", "12", True),
    ("\\boxed{-12}", "12", False),
    ("\\boxed{12!}", "12", False),
    ("\\boxed{12\\%}", "12", True),
    ("\\boxed{1.2 \\times 10^1}", "12", True),
    ("\\boxed{12, 13}", "12", False),
    ("\\boxed{12 \\text{ or } 13}", "12", False),
    ("\\boxed{12 \\pm 1}", "12", False),
    ("\\boxed{\\frac{24}{2}}", "12", True),
    ("\\boxed{24/2}", "12", True),
    ("\\boxed{\\sqrt{144}}", "12", True),
    ("#### 12", "12", True),
    ("#### 12\n#### 13", "12", False),
    ("Final answer: twelve", "12", True),
    ("The answer is not twelve but thirteen.", "12", False),
    ("The answer is 12 but I'm not sure; maybe 13.", "12", False),
    ("So the answer is 13. Wait, no: 12.", "12", True),
    ("\\boxed{12}\n\nActually, the answer is 13.", "12", False),
    ("\\boxed{\\text{twelve}}", "12", True),
    ("\\boxed{12.0}", "12", True),
    ("\\boxed{012}", "12", True),
    ("\\boxed{1 2}", "12", False),
    ("\\boxed{12/1}", "12", True),
    ("\\boxed{(12)}", "12", True),
    ("\\boxed{[12]}", "12", False),
    ("\\boxed{\\{12\\}}", "12", False),
    ("\\boxed{12 \\neq 13}", "12", False),
    ("\\boxed{x \\le 12}", "12", False),
    ("\\boxed{13-1}", "12", True),
    ("The answer is -12.", "12", False),
    ("The answer is minus 12", "12", False),
    ("the answer is 12 (not 13)", "12", True),
    ("\\boxed{1e1}", "10", True),
    ("The answer: $12", "12", True),
    ("The answer is $\\boxed{12}$ dollars", "12", True),
    ("The answer is \\(12\\).", "12", True),
    ("The answer is 12 or 12.0", "12", True),
    ("\\boxed{\\dfrac{1}{2}}", "0.5", True),
    ("\\boxed{0.5}", "\\frac12", True),
    ("\\boxed{\\infty}", "12", False),
    ("\\boxed{12}\\boxed{}", "12", True),
    ("\\boxed{12 and 13}", "12", False),
    ("\\boxed{\\text{12 or 13}}", "12", False),
    ("\\boxed{12\\text{ or }13}", "12", False),
    ("\\boxed{\\text{No answer}}", "12", False),
    ("\\boxed{\\text{A}}", "12", False),
]

# Where the scorer is stricter than the reader (right outputs scored wrong); none goes the other way.
STRICTER = {
    "A is not right. B isn't either. So C.",
    "A? No. B? Yes.",
    "So the answer is 13. Wait, no: 12.",
}


@pytest.mark.parametrize(("text", "want"), MC, ids=[t[:40] for t, _ in MC])
def test_choice_never_more_lenient_than_a_reader(text, want):
    got = extract_choice(text, CH)
    if text in STRICTER:
        assert got is None, (text, got)
    else:
        assert got == want, (text, got)


@pytest.mark.parametrize(("text", "gold", "want"), MATH, ids=[t[:40] for t, _, _ in MATH])
def test_math_never_more_lenient_than_a_reader(text, gold, want):
    got = score(Item("m", "q", gold, "math"), text).correct
    assert got == (want and text not in STRICTER), (text, gold, got)
