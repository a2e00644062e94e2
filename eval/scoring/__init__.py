"""Scoring: answer extraction and comparison for math, multiple-choice and code tasks (`score`), with
the choice rules (`eval.scoring.choice_extraction`), the symbolic comparison in a helper process
(`eval.scoring.symbolic`) and number words (`eval.scoring.number_words`). The rules are in
eval/scoring/README.md; code is judged in `eval.sandbox`, never in this process.

Example:
```python
from eval.scoring import extract_boxed, math_equal

assert extract_boxed(r"so \\boxed{\\frac{1}{2}}.") == r"\\frac{1}{2}"
assert math_equal("0.5", r"\\dfrac{1}{2}")
```
"""

from eval.scoring.scorer import (
    MAX_OUTPUT_CHARS,
    Score,
    build_candidate,
    build_program,
    extract_boxed,
    extract_choice,
    extract_code,
    extract_math_answer,
    math_equal,
    normalize_number,
    score,
)

__all__ = [
    "MAX_OUTPUT_CHARS",
    "Score",
    "build_candidate",
    "build_program",
    "extract_boxed",
    "extract_choice",
    "extract_code",
    "extract_math_answer",
    "math_equal",
    "normalize_number",
    "score",
]
