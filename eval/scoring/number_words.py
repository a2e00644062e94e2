"""English number words to numbers: "seven", "twenty-one", "minus three", "two and a half".

Only a string that is wholly a number phrase (optionally followed by a unit word) is read; prose that
merely contains number words is left alone, so "one of them" never becomes 1.
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_FRACTIONS = {"half": Fraction(1, 2), "quarter": Fraction(1, 4), "third": Fraction(1, 3)}
_NEGATIVE = ("minus", "negative")
WORD_RE = re.compile(
    r"\b(?:minus|negative|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
    r"ninety|hundred|thousand|million|billion|half|quarter|third|and|a|an)\b",
    re.IGNORECASE,
)


def _integer(words: list[str]) -> int | None:
    total, current, seen = 0, 0, False
    for w in words:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w in _SCALES:
            if w == "hundred":
                current = max(current, 1) * 100
            else:
                total += max(current, 1) * _SCALES[w]
                current = 0
        elif w == "and":
            continue
        else:
            return None
        seen = True
    return total + current if seen else None


def words_to_number(s: str) -> Fraction | None:
    """The value of a number phrase, or None if `s` is not one (see the module docstring)."""
    words = re.findall(r"[a-z]+", s.lower().replace("-", " "))
    if not words or re.search(r"[^a-zA-Z\s,.\-]", s):
        return None
    sign = 1
    if words[0] in _NEGATIVE:
        sign, words = -1, words[1:]
    # "two and a half", "one and a quarter", "a half"
    frac = Fraction(0)
    if len(words) >= 2 and words[-1] in _FRACTIONS and words[-2] in ("a", "an", "one"):
        frac, words = _FRACTIONS[words[-1]], words[:-2]
        if words and words[-1] == "and":
            words = words[:-1]
    if not words:
        return sign * frac if frac else None
    whole = _integer(words)
    if whole is None:
        return None
    return sign * (whole + frac)
