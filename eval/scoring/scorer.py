"""Answer extraction and scoring for math, multiple-choice and code tasks.

The official LatentMAS scorer is brittle: a `[^}]*` regex for `\\boxed{}` (nested braces break it),
exact string equality ("1,000" reads as "1", "18.0" != "18") and `exec` of model code in-process.
Here:
- math: the last balanced `\\boxed{...}` / `\\fbox{...}`, else "the answer is X" / "#### X", else
  the last number; then exact rational comparison after normalising commas, signs, decimals,
  fractions (`3/4`, `\\frac`, `\\dfrac`), `$`, `%` and trailing units; `math_verify` for anything
  symbolic (`\\sqrt{2}/2`, intervals, expressions);
- multiple choice: a letter from `\\boxed{B}`, "(B)", "B.", "Answer: b", "**B**", or the option's
  own text, checked against the number of options;
- code: the last fenced python block (else a `def` block), judged by `eval.sandbox.code_verdict`: the
  tests run in a judge process the candidate cannot write to, never in this process.

The package docstring (`eval.scoring`) has a runnable example.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fractions import Fraction

from eval.sandbox.code_verdict import (
    MAX_CANDIDATE_CHARS,
    MAX_CANDIDATE_LINES,
    SandboxImportError,
    canary,
    judge_code,
)
from eval.scoring.choice_extraction import MAX_OUTPUT_CHARS
from eval.scoring.choice_extraction import extract_choice as _extract_choice
from eval.scoring.number_words import words_to_number
from eval.scoring.symbolic import symbolic_equal
from eval.tasks import Item
from latent.thinking import strip_thinking

logger = logging.getLogger(__name__)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_N_CHOICES = 5  # letters A-E accepted when an item does not list its options


def _too_long(text: object) -> str | None:
    """Why a text is left unread (longer than `MAX_OUTPUT_CHARS`), or None: the guard each public
    reader here starts with, so a caller outside `score` gets the same bound."""
    if isinstance(text, str) and len(text) > MAX_OUTPUT_CHARS:
        return f"the output is too long to read ({len(text):,} characters; at most {MAX_OUTPUT_CHARS:,})"
    return None


@dataclass
class Score:
    """Whether a prediction is correct, what was extracted from it, and how (for debugging)."""

    correct: bool
    extracted: str | None
    detail: str = ""
    tests_passed: int | None = None  # code: tests that passed, of `tests_total` (per-test pass fraction)
    tests_total: int | None = None


# --------------------------------------------------------------------------- math extraction


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each "{" -> index of its matching "}", in one pass (escaped braces never count)."""
    pairs, stack, i, n = {}, [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2  # an escaped character (\{, \}) never opens or closes a group
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])(\s*)")


_NON_BLANK_RE = re.compile(r"\S")


def extract_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` or `\\fbox{...}` (nested braces allowed).

    `\\boxed 5` (no braces) yields the following token. A truncated last box is skipped in favour
    of the previous complete one. Linear in the length of `text`, however many boxes are unclosed or
    nested: boxes are tried from the last one back, and only the chosen one is copied out.
    """
    if _too_long(text):
        return None
    box = last_box(text)
    return box[0] if box else None


def last_box(text: str) -> tuple[str, int] | None:
    """(content, end index) of the box `extract_boxed` reads, or None."""
    if _too_long(text):
        return None
    boxes = list(_BOX_RE.finditer(text))
    if not boxes:
        return None
    pairs = _brace_pairs(text)
    for m in reversed(boxes):
        j = m.end()
        if j < len(text) and text[j] == "{":
            if j not in pairs:
                continue  # truncated
            # an empty box commits to nothing; a blank one holds no other box, so this stays linear
            if _NON_BLANK_RE.search(text, j + 1, pairs[j]):
                return text[j + 1 : pairs[j]].strip(), pairs[j] + 1
        elif m.group(1):
            tok = re.match(r"[^\s$]{1,200}", text[j : j + 200])
            if tok:
                return tok.group(0), j + tok.end()
    return None


_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+"
_NUM_RE = re.compile(_NUM)
# Possessive `\s*+`: three backtracking `\s*` before `(.+)` took cubic time on "answer" + newlines.
_ANSWER_PHRASE_RE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*+(?:is|=|:)?\s*+[:：]?\s*+(.+)", re.IGNORECASE
)
_HASHES_RE = re.compile(r"####[ \t]*([^\n]+)")
# The text stops mid-sentence (on a word or an operator, not a number): its last number is a step.
_CUT_OFF_RE = re.compile(r"(?:[^\W\d]|[,:;=+\-*/×(\[{])\s*$")


def _clip_answer(s: str) -> str:
    """Cut an answer phrase at the end of its sentence: 'is 42. Next...' -> '42'."""
    s = s.strip().split("\n")[0]
    s = re.split(r"\.(?!\d)|;|,\s(?![0-9]{3}\b)|\s(?:because|since|which|as)\s", s)[0]
    return s.strip().strip("*").strip()


_NUMBERISH = r"(?:[-+−]?\$?\d[\d,.]*(?:\s+\d+/\d+)?|[-+−]?\d*\.\d+|[a-z]+(?:[- ][a-z]+)*)"
_HEDGE_NUM_RE = re.compile(
    rf"(?:between|either|from)\s+({_NUMBERISH})\s+(?:and|or|to)\s+({_NUMBERISH})\b.*|({_NUMBERISH})\s+or\s+({_NUMBERISH})",
    re.IGNORECASE,
)
_CORRECTION_RE = re.compile(
    r"\b(?:it\s+is|it['’]s|it\s+was|but|rather|instead|actually)\s+(?:is\s+)?(.+)", re.I
)
_MAX_PHRASE_CHARS = 500  # an answer phrase longer than this is prose; it is read only this far
_MINUS_WORD_RE = re.compile(r"\b(?:minus|negative)\s*$", re.IGNORECASE)


def _numeric(ans: str) -> bool:
    return bool(ans) and (normalize_number(ans) is not None or bool(_NUM_RE.search(ans)) or "\\" in ans)


_VERB_RE = re.compile(r"\b(?:is|equals|was)\b")


def _last_verb_end(s: str) -> int | None:
    """End of the last "is"/"equals"/"was" in `s`, else of its last "=" or ":" (one linear scan each)."""
    end = None
    for m in _VERB_RE.finditer(s):
        end = m.end()
    if end is None:
        pos = max(s.rfind("="), s.rfind(":"))
        end = pos + 1 if pos >= 0 else None
    return end


_LEAD_WORDS_RE = re.compile(
    r"^(?:(?:approximately|about|around|roughly|exactly|precisely|simply|just|equal\s+to|given\s+by|"
    r"therefore|thus|so|then|now|clearly|indeed)\s+)+",
    re.IGNORECASE,
)
_TRAILING_ASIDE_RE = re.compile(r"\s*\([^()]{0,80}\)\s*$")
_SENTENCE_END_RE = re.compile(r"[.!?](?!\d)|\n")


def _phrase_answer(rest: str) -> tuple[str | None, str]:
    """The answer an "answer is ..." phrase gives: corrections win over negated values, hedges give none."""
    line = rest.strip().split("\n")[0][:_MAX_PHRASE_CHARS].strip().strip("*").strip()
    if re.match(r"(?:not|n['’]t)\b", line, re.IGNORECASE):  # "is not 5, it is 6"
        fix = _CORRECTION_RE.search(line)
        if not fix:
            return None, "negated"
        line = fix.group(1)
    ans = _LEAD_WORDS_RE.sub("", _clip_answer(line))  # "approximately 12" -> "12"
    cut = _last_verb_end(ans)  # "final answer to the problem is 4"
    if cut is not None and normalize_number(ans) is None and _numeric(ans[cut:]):
        ans = ans[cut:].strip()
    aside = _TRAILING_ASIDE_RE.search(ans)  # "12 (not 13)", "12 (twelve)"
    if (
        aside
        and aside.start() > 0
        and normalize_number(ans) is None
        and normalize_number(ans[: aside.start()])
    ):
        ans = ans[: aside.start()]
    hedge = _HEDGE_NUM_RE.fullmatch(ans)
    if hedge:
        a, b = (hedge.group(1), hedge.group(2)) if hedge.group(1) else (hedge.group(3), hedge.group(4))
        if normalize_number(a) is not None and normalize_number(b) is not None and not math_equal(a, b):
            return None, "hedged"
    return (ans, "phrase") if _numeric(ans) else (None, "no number")


def _last_number(text: str) -> re.Match | None:
    """The last number of `text`, read from a window at its end (widened when the number may go on)."""
    for width in (4_000, len(text)):
        start = max(0, len(text) - width)
        last = None
        for last in _NUM_RE.finditer(text, start):  # noqa: B007 - keeps the last match
            pass
        if last is not None and (last.start() > start or start == 0):
            return last
        if last is None and start == 0:
            return None
    return None


def _box_or_later_phrase(text: str, boxed: str, end: int) -> tuple[str, str]:
    """The box, unless an answer phrase after it commits to another number (last commitment wins:
    "\\boxed{12} ... Actually, the answer is 13." is 13)."""
    later = None
    for later in _ANSWER_PHRASE_RE.finditer(text, end):  # noqa: B007 - keeps the last match
        pass
    if later is not None:
        ans, how = _phrase_answer(later.group(1))
        a, b = normalize_number(ans) if ans else None, normalize_number(boxed)
        if how == "phrase" and a is not None and b is not None and a != b:
            return ans, "phrase after the box"
    return boxed, "boxed"


def extract_math_answer(text: str, last_number_when_cut_off: bool = False) -> tuple[str | None, str]:
    """The answer string of a math response and how it was found ("boxed", "####", "phrase", "last number").

    Returns (None, reason) when nothing is found, when the final answer phrase hedges between two
    values ("between 3 and 5": a hedge is no answer, whatever numbers came before it), or when
    only the last-number fallback is left and the text stops mid-sentence (its last number is an
    unfinished step; `last_number_when_cut_off=True` takes it anyway, for comparisons).
    """
    why = _too_long(text)
    if why:
        return None, why
    box = last_box(text)
    if box is not None:
        return _box_or_later_phrase(text, *box)
    for raw in reversed(_HASHES_RE.findall(text)):  # the last numeric one; read from the end
        h = _clip_answer(raw)
        if _numeric(h):
            return h, "####"
    phrases = list(_ANSWER_PHRASE_RE.finditer(text))
    negated = (0, 0)  # the negated sentence of the last phrase, whose numbers are no fallback
    if phrases:
        ans, how = _phrase_answer(phrases[-1].group(1))
        if how == "hedged":
            return None, "hedged between two answers"
        if ans is not None:
            return ans, how
        if how == "negated":  # "The answer is not 12.": 12 is no fallback; a number outside the sentence is
            end = _SENTENCE_END_RE.search(text, phrases[-1].start(1))
            negated = (phrases[-1].start(), end.end() if end else len(text))
    last = _last_number(text)
    if last and negated[0] <= last.start() < negated[1]:
        return None, "negated"
    if last and last_number_when_cut_off is False and _CUT_OFF_RE.search(text[-200:]):
        return None, "cut off mid-sentence"
    if last:
        num = last.group(0)
        if num[0] not in "+-−" and _MINUS_WORD_RE.search(text[max(0, last.start() - 12) : last.start()]):
            num = "-" + num  # "the result is minus 3"
        return num, "last number"
    return None, "nothing found"


# --------------------------------------------------------------------------- numbers

_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC_RE = re.compile(r"^\\[dt]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}$")
_FRAC_SHORT_RE = re.compile(r"^\\[dt]?frac\s*(\d)\s*(\d)$")
_UNIT_TAIL_RE = re.compile(r"^(.*?\d)\s*+(?:[a-zA-Z][a-zA-Z./^\d\s]{0,40}|%|\\%|°|\^\{?\\circ\}?|\\circ)$")
# Not a unit: a second number ("12 or 13", "12 and 13 apples") or a joining word ("12 or more").
_NOT_A_UNIT_RE = re.compile(
    r"(?<![\w^./])\d|^\s*(?:or|and|to|plus|minus|times|over|nor|not|vs|versus|but|either)\b", re.IGNORECASE
)


def _strip_latex_noise(s: str) -> str:
    s = s.strip()
    s = s.replace("\\$", "").replace("$", "").replace("\\!", "").replace("\\,", "").replace("\\;", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("−", "-").replace("–", "-")
    s = s.replace("{,}", ",").replace("\\%", "%")
    s = _TEXT_CMD_RE.sub(r"\1", s)
    s = s.strip().rstrip(".").strip()
    if "=" in s:  # "x = 5" -> "5"
        s = s.rsplit("=", 1)[1].strip()
    for currency in ("USD", "US$", "€", "£", "¥", "Rs."):
        s = s.replace(currency, "")
    return s.strip()


def _ratio(num: Fraction | str | None, den: Fraction | str | None, sign: int) -> Fraction | None:
    if not isinstance(num, Fraction) or not isinstance(den, Fraction) or den == 0:
        return None
    return sign * num / den


_SPLIT_DIGITS_RE = re.compile(r"\d\s+\d")
_SPACE_THOUSANDS_RE = re.compile(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?")


def _to_fraction(s: str) -> Fraction | str | None:
    s = s.strip()
    if _SPLIT_DIGITS_RE.search(s) and not _SPACE_THOUSANDS_RE.fullmatch(s):
        return None  # "1 2" is two numbers; "1 000 000" (spaces between thousands) is one
    s = s.replace(" ", "")
    if not s:
        return None
    body = s.lstrip("+-")  # one cut, not one copy per sign: "-" * 300_000 was quadratic
    sign = -1 if s[: len(s) - len(body)].count("-") % 2 else 1
    s = body
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    m = _FRAC_RE.match(s) or _FRAC_SHORT_RE.match(s)
    if m:
        return _ratio(_to_fraction(m.group(1)), _to_fraction(m.group(2)), sign)
    if s.count("/") == 1:
        a, b = s.split("/")
        return _ratio(_to_fraction(a), _to_fraction(b), sign)
    if not _DECIMAL_RE.fullmatch(s):
        return None
    value = _decimal_value(s.replace(",", ""))
    if isinstance(value, str):
        return ("-" if sign < 0 else "") + value
    return None if value is None else sign * value


# Exact values are built only up to this many digits; beyond, a number is compared by its canonical
# digits-and-exponent form, so `1e100000000` costs nothing and 4,301-digit integers never meet
# Python's int-to-str limit.
MAX_EXACT_DIGITS = 1000
_MAX_PRINT_BITS = 12_000  # about 3,600 decimal digits, under Python's 4,300-digit int-to-str limit
_DECIMAL_RE = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][-+]?\d+)?")
_DECIMAL_PARTS_RE = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?")


def _decimal_value(s: str) -> Fraction | str | None:
    """A plain decimal ("12", "0.50", "1e5000") as an exact Fraction, or as "<digits>e<exp>" when huge."""
    m = _DECIMAL_PARTS_RE.fullmatch(s)
    if not m or not (m.group(1) or m.group(2)):
        return None
    whole, frac, exp = m.group(1), m.group(2) or "", m.group(3) or "0"
    if len(exp.lstrip("+-").lstrip("0")) > 30:
        return None  # an exponent of more than 30 digits is not a number anyone means
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    e = int(exp) - len(frac)
    stripped = digits.rstrip("0")
    e += len(digits) - len(stripped)
    digits = stripped
    if len(digits) + max(e, 0) <= MAX_EXACT_DIGITS and -e <= MAX_EXACT_DIGITS:
        return Fraction(int(digits) * 10**e) if e >= 0 else Fraction(int(digits), 10**-e)
    return f"{digits}e{e}"


_MIXED_RE = re.compile(r"([-+]?)(\d+)(?:\s+(\d+)\s*/\s*(\d+)|\s*\\[dt]?frac\s*\{(\d+)\}\s*\{(\d+)\})")


def _mixed_number(t: str) -> Fraction | None:
    """ "1 1/2" and "2\\frac{1}{2}" are mixed numbers (3/2, 5/2) when the fraction is proper."""
    m = _MIXED_RE.fullmatch(t.strip())
    if not m or max(len(g or "") for g in m.groups()) > 100:
        return None
    num, den = (m.group(3), m.group(4)) if m.group(3) else (m.group(5), m.group(6))
    num, den = int(num), int(den)
    if den == 0 or num >= den:
        return None
    value = int(m.group(2)) + Fraction(num, den)
    return -value if m.group(1) == "-" else value


def _number_phrase(t: str) -> Fraction | None:
    """ "seven", "twenty-one apples", "minus three": a number written in words, then unit words."""
    if len(t) > 200 or not re.fullmatch(r"[A-Za-z][A-Za-z\s\-]*", t):
        return None
    words = t.split()
    for k in range(len(words), max(0, len(words) - 3), -1):  # drop up to three trailing unit words
        if set(w.lower() for w in words[k:]) & _NOT_UNITS:
            return None  # "one of them", "two more than x": prose, not a number and its unit
        value = words_to_number(" ".join(words[:k]))
        if value is not None:
            return value
    return None


_NOT_UNITS = {"of", "the", "them", "is", "was", "more", "less", "than", "to", "in", "at", "by", "for", "or"}


_OPTION_LABEL_RE = re.compile(r"^(?:\(?[A-Ea-e]\)\s*|[A-E][.:]\s+)(?=[-+−$\\\d.])")


def normalize_number(s: str) -> str | None:
    """Canonical form of a single number written in prose or LaTeX, or None if `s` is not one.

    "1,234" -> "1234", "$5.00" -> "5", "-3" -> "-3", "18.0" -> "18", "0.50" -> "1/2",
    "\\dfrac{3}{4}" -> "3/4", "12 cm" -> "12", "50\\%" -> "50". Integers print as integers, other
    rationals as reduced "p/q" so that decimals and fractions compare exactly.
    """
    if _too_long(s):
        return None
    if s is None:
        return None
    t = _strip_latex_noise(str(s))
    t = re.sub(r"^(?:minus|negative)\s+(?=\d)", "-", t, flags=re.IGNORECASE)  # "minus 3"
    t = _OPTION_LABEL_RE.sub("", t)  # "(B) 12", "B. 12": the value of a labelled option
    value = _mixed_number(t) or _to_fraction(t)
    if value is None:
        value = _number_phrase(t)
    if value is None:
        m = _UNIT_TAIL_RE.match(t)
        if m and "\\frac" not in t and not _NOT_A_UNIT_RE.search(t[m.end(1) :]):
            value = _mixed_number(m.group(1)) or _to_fraction(m.group(1))
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > _MAX_PRINT_BITS:
        return None  # too long to print exactly (Python's int-to-str limit); compared as text instead
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


# --------------------------------------------------------------------------- math equality


def _text_norm(s: str) -> str:
    s = re.sub(r"\s+", " ", _TEXT_CMD_RE.sub(r"\1", s).replace("$", ""))
    s = re.sub(r"(?<!\d) | (?!\d)", "", s)  # spaces go, except between digits: "1 2" is never "12"
    return s.rstrip(".").lower()


_MAX_SYMBOLIC_CHARS = 400
_BIG_EXPONENT_RE = re.compile(r"\^\s*\{?\s*\(?\s*(\d{4,})|\^\s*\{[^{}]*\^|(\d{4,})\s*!|\d{101}")


_PYTHON_CALL_RE = re.compile(
    r"\b(?:eval|exec|compile|open|import|getattr|setattr|delattr|lambda|bytes|bytearray|chr|globals|locals|"
    r"vars|breakpoint|input|system|popen|subprocess|builtins)\b"
)


def _symbolic_safe(s: str) -> bool:
    """Whether sympy can look at `s` in bounded time: short, shallow, no huge powers or factorials.

    sympy evaluates `10^{100000000}` or `100000!` eagerly, in C, where no timeout reaches; such an
    answer is compared as text instead.
    """
    if len(s) > _MAX_SYMBOLIC_CHARS or _BIG_EXPONENT_RE.search(s):
        return False
    if "__" in s or any(c in s for c in "'\"`;@") or _PYTHON_CALL_RE.search(s):
        return False  # Python, not mathematics: never handed to a parser that may evaluate it
    depth = deepest = 0
    for c in s:
        depth += c in "({[" and 1 or -(c in ")}]")
        deepest = max(deepest, depth)
    return deepest <= 20


def _math_verify_equal(pred: str, gold: str) -> bool | None:
    """`math_verify` on two answer strings, in a helper process that is killed when it takes longer
    than `eval.scoring.symbolic.TIMEOUT_S` (from any thread); None when unavailable, unparsable or too slow."""
    if not (_symbolic_safe(pred) and _symbolic_safe(gold)):
        return None
    return symbolic_equal(pred, gold)


_COLLECTION_RE = re.compile(r"\[.*\]|\\?\{.*\\?\}", re.DOTALL)


def math_equal(pred: str | None, gold: str) -> bool:
    """True if `pred` and `gold` are the same answer: exact rationals first, then `math_verify`."""
    if _too_long(pred) or _too_long(gold):
        return False
    if pred is None:
        return False
    p, g = normalize_number(pred), normalize_number(gold)
    if p is not None and g is not None:
        return p == g
    if _text_norm(pred) == _text_norm(gold):
        return True
    if g is not None and _COLLECTION_RE.fullmatch(_text_norm(pred)):
        return False  # a list or set ("[12]", "\\{12\\}") is not the number 12, whatever math_verify says
    verdict = _math_verify_equal(pred, gold)
    return bool(verdict)


# --------------------------------------------------------------------------- multiple choice


def extract_choice(text: str, choices: list[str] | None) -> str | None:
    """The option letter ("A".."Z", upper case) a response commits to, or None.

    The last non-empty `\\boxed{}` (a letter or an option's text) first, then the latest
    non-negated commitment unless a hedge follows it (`eval.scoring.choice_extraction`, policy in
    eval/scoring/README.md). Only letters within the number of `choices` (A-E when unknown) count.
    """
    if _too_long(text):
        return None
    boxed, boxed_end = last_box(text) or (None, None)
    return _extract_choice(text, choices, boxed, boxed_end=boxed_end)


# --------------------------------------------------------------------------- code

_FENCE_LANG_RE = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every ``` fence, an unclosed last one included, in one linear pass."""
    blocks, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return blocks
        nl = text.find("\n", start + 3)
        if nl < 0:  # a fence with no line after it opens nothing (nor can any later one)
            return blocks
        lang = _FENCE_LANG_RE.match(text, start + 3, nl).group(1)
        end = text.find("```", nl + 1)
        blocks.append((lang, text[nl + 1 : end if end >= 0 else len(text)]))
        if end < 0:
            return blocks
        pos = end + 3


_CODE_START_RE = re.compile(r"^(?:def |class |import |from \S+ import |@)")


def extract_code(text: str) -> str | None:
    """The last fenced python block (``` python / py / untagged; an unclosed last fence counts),
    else the def/class/import block the response contains, else None."""
    if _too_long(text):
        return None
    blocks = [(lang.lower(), body) for lang, body in _fenced_blocks(text)]
    python_blocks = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    untagged = [b for lang, b in blocks if lang == ""]
    for candidates in (python_blocks, untagged):
        candidates = [b for b in candidates if b.strip()]
        if candidates:
            return candidates[-1].strip("\n") + "\n"
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _CODE_START_RE.match(ln)), None)
    if start is None:
        return None
    out = []
    for ln in lines[start:]:
        if ln.strip() == "" or ln[:1] in (" ", "\t", "#", ")", "]", "}") or _CODE_START_RE.match(ln):
            out.append(ln)
        else:
            break  # prose after the code
    code = "\n".join(out).strip("\n")
    return code + "\n" if "def " in code or "class " in code else None


def _prompt_imports(prompt: str) -> str:
    return "".join(ln + "\n" for ln in prompt.splitlines() if re.match(r"^(?:import |from \S+ import )", ln))


def build_candidate(item: Item, code: str) -> str:
    """The candidate module the code judge loads: the code, completed by the item's prompt.

    If the code does not define `entry_point` (a body-only completion) the item's prompt is put in
    front (HumanEval style); otherwise the prompt's imports are (so `List[int]` resolves).
    """
    prompt = item.meta.get("prompt", "") if item.meta else ""
    if item.entry_point and prompt:
        # [ \t], not \s: `^\s*` would rescan every following blank line from each line start
        defines = re.search(
            rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(item.entry_point)}[ \t]*\(", code, re.MULTILINE
        )
        code = _prompt_imports(prompt) + code if defines else prompt + code
    return code


def build_program(item: Item, code: str) -> str:
    """One script with the candidate and then the item's tests (for running a solution by hand;
    scoring never trusts such a script's exit code, see `eval.sandbox.code_verdict`)."""
    return f"{build_candidate(item, code)}\n\n{item.tests or ''}\n"


# --------------------------------------------------------------------------- entry point


def _score_rg(item: Item, text: str) -> Score:
    import reasoning_gym

    answer, how = extract_math_answer(text)
    if answer is None:
        return Score(False, None, "no answer found")
    fn = reasoning_gym.get_score_answer_fn(item.meta["rg_task"])
    entry = {"question": item.question, "answer": item.gold, "metadata": item.meta.get("rg_metadata", {})}
    try:
        value = float(fn(answer, entry))
    except Exception as e:  # noqa: BLE001 - verifier bugs must not crash a run
        return Score(False, answer, f"reasoning_gym verifier failed: {e}")
    correct = value >= 1.0 or math_equal(answer, item.gold)
    return Score(correct, answer, f"{how}; reasoning_gym score {value:g}")


def _clean_text(text: str) -> str:
    """Lone surrogates (invalid in UTF-8) become U+FFFD, so nothing downstream fails to encode."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _score_code(item: Item, text: str, sandbox_timeout: float) -> Score:
    code = extract_code(text)
    if code is None:
        return Score(False, None, "no code found")
    if not item.tests:
        return Score(False, code, f"code item {item.id!r} has no `tests`; it cannot be scored")
    if len(code) > MAX_CANDIDATE_CHARS or code.count("\n") > MAX_CANDIDATE_LINES:
        return Score(
            False,
            None,
            f"the code is too long (at most {MAX_CANDIDATE_CHARS} characters and "
            f"{MAX_CANDIDATE_LINES} lines are scored)",
        )
    meta = item.meta or {}
    prompt = meta.get("prompt", "")
    canary(item.tests, prompt)  # raises SandboxImportError: every item would score wrong here
    v = judge_code(
        build_candidate(item, code),
        item.tests,
        item.entry_point,
        prompt,
        timeout=sandbox_timeout,
        call_names=tuple(meta.get("candidate_names", ())),
    )
    return Score(v.passed, code, v.detail, v.tests_passed, v.tests_total)


def _score(item: Item, text: str, sandbox_timeout: float) -> Score:
    if item.kind == "math":
        if item.meta and item.meta.get("rg_task"):
            return _score_rg(item, text)
        answer, how = extract_math_answer(text)
        return Score(math_equal(answer, item.gold), answer, how)
    if item.kind == "mc":
        letter = extract_choice(text, item.choices)
        gold = str(item.gold).strip().upper()
        return Score(letter == gold, letter, "" if letter else "no option letter found")
    if item.kind == "code":
        return _score_code(item, text, sandbox_timeout)
    return Score(False, None, f"unknown item kind {item.kind!r}; expected 'math', 'mc' or 'code'")


def score(item: Item, text: str, sandbox_timeout: float = 10.0) -> Score:
    """Score one model output against `item` by its kind ("math", "mc" or "code").

    Never raises for an item or an output: a bad one (not a str, an unknown kind, a code item
    without tests, a bug met on odd input) is scored wrong with the reason in `detail`, so a run
    goes on and records it. Code items also report how many of their tests passed. Raises
    `eval.sandbox.code_verdict.SandboxImportError` when the sandbox cannot import what a code task's tests
    import (a canary run, once per import set): every item would otherwise score wrong.
    """
    if not isinstance(text, str):
        return Score(False, None, f"the prediction is not a str but {type(text).__name__}")
    if len(text) > MAX_OUTPUT_CHARS:
        return Score(
            False,
            None,
            f"the output is too long to score ({len(text):,} characters; at most {MAX_OUTPUT_CHARS:,})",
        )
    try:
        # a thinking model's answer is what follows its <think> block (Qwen3)
        return _score(item, strip_thinking(_clean_text(text)), sandbox_timeout)
    except SandboxImportError:
        raise  # the machine cannot score code at all: stop, rather than score every item wrong
    except Exception as e:  # noqa: BLE001 - one odd item must never abort a run
        logger.warning("scoring item %r failed: %s: %s", getattr(item, "id", "?"), type(e).__name__, e)
        return Score(False, None, f"scoring failed: {type(e).__name__}: {str(e)[:300]}")
