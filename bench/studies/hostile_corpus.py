"""Hostile model outputs for `score()`: each is built to make one extraction or comparison step slow or
memory-hungry (quadratic regex scans, sympy blow-ups, huge numbers, huge code). Used by
`bench/studies/scoring_hostile.py` and `tests/eval/test_scoring_bounds.py`.
"""

from __future__ import annotations

from eval.tasks import Item

MATH = Item("m", "q", "12", "math")
MATH_SYM = Item("ms", "q", "\\frac{\\sqrt{2}}{2}", "math")
MC = Item("mc", "q", "B", "mc", choices=["Paris", "London", "Berlin", "Madrid"])
CODE = Item("c", "", "", "code", tests="assert f(1) == 2\n", entry_point="f", meta={"prompt": "def f(x):\n"})

_REP = 100_000


def corpus() -> list[tuple[str, Item, str]]:
    """(name, item, output) for every hostile output."""
    m = [
        ("phrase + 'is ' x 33k", "The answer is " + "is " * 33_000),
        ("phrase + 'a=' x 50k", "The answer is " + "a=" * 50_000),
        ("phrase + 'ab ' x 33k", "The answer is " + "ab " * 33_000),
        ("phrase + '1 or ' x 20k", "The answer is " + "1 or " * 20_000),
        ("negated phrase + 'but ' x 25k", "The answer is not " + "but " * 25_000),
        ("phrase + number words x 20k", "The answer is " + "twenty " * 20_000),
        ("phrase + '1/' x 50k", "The final answer is " + "1/" * 50_000 + "2"),
        ("answer: + dashes", "answer: " + "-" * _REP + "5"),
        ("#### + '1,' x 50k", "#### " + "1," * 50_000),
        ("3M-digit number", "1" * 3_000_000),
        ("'minus ' x 30k", "minus " * 30_000 + "3"),
        ("1e huge exponent", "1e99999999999999999999999999999999"),
        ("boxed 99!!!", "\\boxed{99!!!}"),
        ("boxed (99!)!", "\\boxed{(99!)!}"),
        ("boxed 10^10^10", "\\boxed{10^{10^{10}}}"),
        ("boxed (x+1)^200", "\\boxed{(x+1)^{200}-(x-1)^{200}}"),
        ("boxed 150-term sum", "\\boxed{" + "x+" * 150 + "1}"),
        ("boxed integral", "\\boxed{\\int_0^1 e^{-x^{2}} dx}"),
        ("boxed big matrix", "\\boxed{\\begin{pmatrix}" + "1&" * 120 + "1\\end{pmatrix}}"),
        ("10k unclosed boxes", "\\boxed{" * 10_000),
        ("100k open braces", "{" * _REP),
        ("10k fracs", "\\frac{" * 10_000 + "1"),
        ("40k blank lines", "\n" * 40_000 + "so 12"),
        ("120k backticks (math)", "`" * 120_000),
        ("lone surrogates", "the answer is \ud800\udfff 12 \ud800"),
        ("1 MB of digits and spaces", "1 " * 500_000),
    ]
    c = [
        ("'Option ' x 30k", "Option " * 30_000 + "B"),
        ("'(A) or ' x 20k", "(A) or " * 20_000),
        ("'answer is ' x 20k", "answer is " * 20_000),
        ("'between (A) and ' x 10k", "between (A) and " * 10_000),
        ("option text + 'x ' x 50k", "A. " + "x " * 50_000),
        ("'**' x 50k", "**" * 50_000 + "B"),
        ("'not ' x 30k", "not " * 30_000 + "choose A"),
        ("'Option A is incorrect. ' x 5k", "Option A is incorrect. " * 5_000),
        ("100k lines of letters", "A\nB\n" * 50_000),
    ]
    k = [
        ("code: 40k blank lines", "```python\n" + "\n" * 40_000 + "def f(x):\n    return 2 * x\n```"),
        ("code: 120k backticks", "`" * 120_000),
        ("code: 30k fences", "```\n" * 30_000),
        ("code: 6 MB candidate", "```python\n" + "x = 1\n" * 1_000_000 + "```"),
        ("code: 100k open parens", "```python\ndef f(x):\n    return " + "(" * _REP + "\n```"),
        ("code: 40k blank lines, no fence", "def f(x):\n" + "\n" * 40_000 + "    return 2 * x\n"),
        ("code: 10 MB of 'a'", "a" * 10_000_000),
        (
            "code: 300k-item literal",
            "```python\ndef f(x):\n    return len([" + "1," * 100_000 + "]) and 2 * x\n```",
        ),
        (
            "code: 3M-digit reply",
            "```python\nimport sys\nsys.set_int_max_str_digits(0)\n"
            "def f(x):\n    return int('7' * 3_000_000)\n```",
        ),
    ]
    m += [
        ("answer + 1.5k newlines (cubic phrase scan)", "answer" + "\n" * 1_500),
        ("answer + 99k newlines", "answer" + "\n" * 99_000),
        ("boxed 99k minus signs", "\\boxed{" + "-" * 99_000 + "1}"),
        ("12k nested boxes", "\\boxed{" * 12_000 + "1" + "}" * 12_000),
        ("14k '#### x' lines", "#### x\n" * 14_000),
        ("boxed 12 or 13, 99k", "\\boxed{" + "12 or 13 " * 11_000 + "}"),
        ("boxed 99!!", "\\boxed{99!!}"),
        ("boxed binom(99999, 50000)", "\\boxed{\\binom{99999}{50000}}"),
        ("boxed Gamma(10000)", "\\boxed{\\Gamma(10000)}"),
        ("boxed (x+1)^999", "\\boxed{(x+1)^{999}}"),
        ("boxed 9^999^999", "\\boxed{9^{999}^{999}}"),
        ("boxed 15 nested roots", "\\boxed{" + "\\sqrt{" * 15 + "2" + "}" * 15 + "}"),
        ("1 MB of '#### x' (over the size limit)", "#### x\n" * 150_000),
        ("3 MB of digits", "12 " * 1_000_000),
    ]
    c += [
        ("'it is B ' x 12k", "it is B " * 12_400),
        ("'I pick B. ' x 10k", "I pick B. " * 9_900),
        ("'Options A, C and D are incorrect. ' x 2.9k", "Options A, C and D are incorrect. " * 2_900),
        ("'B\\n' x 49k", "B\n" * 49_900),
        ("'answer:' x 14k", "answer:" * 14_000),
        ("'A or B ' x 14k", "A or B " * 14_000),
        ("3 MB of 'it is B' (over the size limit)", ("it is B" + " " * 93) * 30_000),
    ]
    k += [
        ("code: 99k of 'def f' lines", "def f(x):\n" * 9_900),
        ("code: 6k fences", "```python\nx\n```\n" * 6_000),
        ("code: 12 MB no fence", "def f(x):\n" + "    x\n" * 2_000_000),
    ]
    out = [(n, MATH, t) for n, t in m] + [("sym " + n, MATH_SYM, t) for n, t in m if "boxed" in n]
    return out + [(n, MC, t) for n, t in c] + [(n, CODE, t) for n, t in k]
