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
- code: the last fenced python block (else a `def` block), judged by `eval.code_verdict`: the
  tests run in a judge process the candidate cannot write to, never in this process.

Example:
```python
from eval.scoring import extract_boxed, math_equal

assert extract_boxed(r"so \\boxed{\\frac{1}{2}}.") == r"\\frac{1}{2}"
assert math_equal("0.5", r"\\dfrac{1}{2}")
```
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from eval.code_verdict import judge_code
from eval.tasks import Item

__all__ = [
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

logger = logging.getLogger(__name__)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_N_CHOICES = 5  # letters A-E accepted when an item does not list its options


@dataclass
class Score:
    """Whether a prediction is correct, what was extracted from it, and how (for debugging)."""

    correct: bool
    extracted: str | None
    detail: str = ""
    tests_passed: int | None = None  # code: tests that passed, of `tests_total` (per-test pass fraction)
    tests_total: int | None = None


# --------------------------------------------------------------------------- math extraction


def _balanced(text: str, open_idx: int) -> str | None:
    """Content of the brace group opening at `text[open_idx] == "{"`, or None if never closed."""
    depth, i = 0, open_idx
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2  # an escaped character (\{, \}) never opens or closes a group
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_idx + 1 : i]
        i += 1
    return None


_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])(\s*)")


def extract_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` or `\\fbox{...}` (nested braces allowed).

    `\\boxed 5` (no braces) yields the following token. A truncated last box is skipped in favour
    of the previous complete one.
    """
    found = None
    for m in _BOX_RE.finditer(text):
        j = m.end()
        if j < len(text) and text[j] == "{":
            inner = _balanced(text, j)
        else:
            tok = re.match(r"[^\s$]+", text[j:]) if m.group(1) else None
            inner = tok.group(0) if tok else None
        if inner is not None:
            found = inner.strip()
    return found


_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+"
_NUM_RE = re.compile(_NUM)
_ANSWER_PHRASE_RE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|=|:)?\s*[:：]?\s*(.+)", re.IGNORECASE
)
_HASHES_RE = re.compile(r"####\s*(.+)")


def _clip_answer(s: str) -> str:
    """Cut an answer phrase at the end of its sentence: 'is 42. Next...' -> '42'."""
    s = s.strip().split("\n")[0]
    s = re.split(r"\.(?!\d)|;|,\s(?![0-9]{3}\b)|\s(?:because|since|which|as)\s", s)[0]
    return s.strip().strip("*").strip()


def extract_math_answer(text: str) -> tuple[str | None, str]:
    """The answer string of a math response and how it was found ("boxed", "phrase", "last number")."""
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed, "boxed"
    hashes = _HASHES_RE.findall(text)
    if hashes:
        return _clip_answer(hashes[-1]), "####"
    phrases = _ANSWER_PHRASE_RE.findall(text)
    if phrases:
        ans = _clip_answer(phrases[-1])
        if ans and (normalize_number(ans) is not None or _NUM_RE.search(ans) or "\\" in ans):
            return ans, "phrase"
    nums = _NUM_RE.findall(text)
    if nums:
        return nums[-1], "last number"
    return None, "nothing found"


# --------------------------------------------------------------------------- numbers

_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC_RE = re.compile(r"^\\[dt]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}$")
_FRAC_SHORT_RE = re.compile(r"^\\[dt]?frac\s*(\d)\s*(\d)$")
_UNIT_TAIL_RE = re.compile(r"^(.*?\d)\s*(?:[a-zA-Z][a-zA-Z./^\d\s]*|%|\\%|°|\^\{?\\circ\}?|\\circ)$")


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


def _to_fraction(s: str) -> Fraction | None:
    s = s.strip().replace(" ", "")
    if not s:
        return None
    sign = 1
    while s[:1] in "+-":
        sign = -sign if s[0] == "-" else sign
        s = s[1:]
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    m = _FRAC_RE.match(s) or _FRAC_SHORT_RE.match(s)
    if m:
        num, den = _to_fraction(m.group(1)), _to_fraction(m.group(2))
        if num is None or den is None or den == 0:
            return None
        return sign * num / den
    if s.count("/") == 1:
        a, b = s.split("/")
        num, den = _to_fraction(a), _to_fraction(b)
        if num is None or den is None or den == 0:
            return None
        return sign * num / den
    if not re.fullmatch(r"(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][-+]?\d+)?", s) or not re.search(
        r"\d", s
    ):
        return None
    try:
        return sign * Fraction(Decimal(s.replace(",", "")))
    except (InvalidOperation, ValueError, OverflowError):
        return None


def normalize_number(s: str) -> str | None:
    """Canonical form of a single number written in prose or LaTeX, or None if `s` is not one.

    "1,234" -> "1234", "$5.00" -> "5", "-3" -> "-3", "18.0" -> "18", "0.50" -> "1/2",
    "\\dfrac{3}{4}" -> "3/4", "12 cm" -> "12", "50\\%" -> "50". Integers print as integers, other
    rationals as reduced "p/q" so that decimals and fractions compare exactly.
    """
    if s is None:
        return None
    t = _strip_latex_noise(str(s))
    value = _to_fraction(t)
    if value is None:
        m = _UNIT_TAIL_RE.match(t)
        if m and "\\frac" not in t:
            value = _to_fraction(m.group(1))
    if value is None:
        return None
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


# --------------------------------------------------------------------------- math equality


def _text_norm(s: str) -> str:
    s = _TEXT_CMD_RE.sub(r"\1", s)
    return re.sub(r"\s+", "", s.replace("$", "")).rstrip(".").lower()


def _math_verify_equal(pred: str, gold: str) -> bool | None:
    """`math_verify` on two answer strings; None when it is unavailable or cannot parse them."""
    try:
        from math_verify import parse, verify
    except ImportError:  # optional: without it only numeric/string comparison applies
        return None
    # math_verify times out with SIGALRM, which only works in the main thread.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        g = parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout)
        p = parse(f"\\boxed{{{pred}}}", parsing_timeout=timeout)
        if not g or not p:
            return None
        return bool(verify(g, p, timeout_seconds=timeout))
    except Exception as e:  # noqa: BLE001 - sympy can raise anything on odd input
        logger.debug("math_verify failed on %r vs %r: %s", pred, gold, e)
        return None


def math_equal(pred: str | None, gold: str) -> bool:
    """True if `pred` and `gold` are the same answer: exact rationals first, then `math_verify`."""
    if pred is None:
        return False
    p, g = normalize_number(pred), normalize_number(gold)
    if p is not None and g is not None:
        return p == g
    if _text_norm(pred) == _text_norm(gold):
        return True
    verdict = _math_verify_equal(pred, gold)
    return bool(verdict)


# --------------------------------------------------------------------------- multiple choice


def _letters(choices: list[str] | None) -> str:
    n = len(choices) if choices else DEFAULT_N_CHOICES
    return LETTERS[: max(1, min(n, 26))]


def _option_norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", _TEXT_CMD_RE.sub(r"\1", s).lower()).strip()


def _letter_only(s: str, valid: str) -> str | None:
    """'B', '(b)', 'B.', '**B**', '\\text{B}', 'B) Paris', 'Option B' -> 'B'."""
    t = _TEXT_CMD_RE.sub(r"\1", s).strip().strip("*_`$ ").strip()
    m = re.fullmatch(
        r"(?:option|choice)?\s*[\(\[]?([A-Za-z])[\)\]]?[.:)]?(?:\s+.*)?", t, re.IGNORECASE | re.DOTALL
    )
    if not m:
        return None
    letter = m.group(1)
    rest = t[m.end(1) :]
    # A lowercase letter followed by more words is prose ("a prime number"), not an option.
    if letter.islower() and re.match(r"\s+\w", rest) and not re.match(r"[\)\].:]", rest):
        return None
    if letter.isupper() and re.match(r"\s+[a-z]", rest) and not re.match(r"[\)\].:]", rest):
        return None  # "A number ..." is prose too
    letter = letter.upper()
    return letter if letter in valid else None


def _match_option_text(s: str, choices: list[str] | None) -> str | None:
    """The letter of the single option whose text equals (or alone appears in) `s`."""
    if not choices:
        return None
    target = _option_norm(s)
    if not target:
        return None
    norms = [_option_norm(c) for c in choices]
    exact = [i for i, c in enumerate(norms) if c and c == target]
    if len(exact) == 1:
        return LETTERS[exact[0]]
    contained = [i for i, c in enumerate(norms) if c and re.search(rf"(?<!\w){re.escape(c)}(?!\w)", target)]
    # Prefer the longest match when one option's text contains another's ("2" in "12").
    if contained:
        longest = max(contained, key=lambda i: len(norms[i]))
        others = [i for i in contained if i != longest and norms[i] not in norms[longest]]
        if not others:
            return LETTERS[longest]
    return None


_CHOICE_PHRASE_RE = re.compile(
    r"(?:answer|option|choice)\s*(?:is|would\s+be|will\s+be|should\s+be)?\s*(?:option|choice)?\s*[:：]?\s*"
    r"(\**\s*[\(\[]?[A-Za-z][\)\]]?(?![A-Za-z0-9])\s*\**)",
    re.IGNORECASE,
)


def extract_choice(text: str, choices: list[str] | None) -> str | None:
    """The option letter ("A".."Z", upper case) a response picks, or None.

    Order: the last `\\boxed{}` (a letter or an option's text), then the last "answer is (C)" /
    "Answer: b" / "correct option: **B**" phrase, then a final line that is just a letter ("(B)",
    "B.", "**B**"), then the option text named after the last "answer", then the last "(B)" on the
    final line. Only letters within the
    number of `choices` (A-E when unknown) count.
    """
    valid = _letters(choices)
    boxed = extract_boxed(text)
    if boxed is not None:
        got = _letter_only(boxed, valid) or _match_option_text(boxed, choices)
        if got:
            return got
    for m in reversed(list(_CHOICE_PHRASE_RE.finditer(text))):
        raw = m.group(1)
        letter = re.search(r"[A-Za-z]", raw).group(0)
        after = text[m.end() :]
        bracketed = "(" in raw or "[" in raw or "*" in raw
        if letter.islower() and not bracketed and re.match(r"\s*\w", after):
            continue  # "the answer is a bit tricky"
        if letter.isupper() and not bracketed and re.match(r" [a-z]", after):
            continue  # "answer: A number of ..." is prose
        if letter.upper() in valid:
            return letter.upper()
    for line in reversed([ln for ln in text.strip().splitlines() if ln.strip()][-3:]):
        got = _letter_only(line, valid)
        if got:
            return got
    phrases = list(re.finditer(r"answer\s*(?:is|:)?", text, re.IGNORECASE))
    if phrases:
        got = _match_option_text(_clip_answer(text[phrases[-1].end() :]), choices)
        if got:
            return got
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    marked = re.findall(r"\(([A-Z])\)", lines[-1]) if lines else []  # "... so it must be (B)"
    marked = [m for m in marked if m in valid]
    return marked[-1] if marked else None


# --------------------------------------------------------------------------- code

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START_RE = re.compile(r"^(?:def |class |import |from \S+ import |@)")


def extract_code(text: str) -> str | None:
    """The last fenced python block (``` python / py / untagged; an unclosed last fence counts),
    else the def/class/import block the response contains, else None."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
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
        defines = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(item.entry_point)}\s*\(", code, re.MULTILINE)
        code = _prompt_imports(prompt) + code if defines else prompt + code
    return code


def build_program(item: Item, code: str) -> str:
    """One script with the candidate and then the item's tests (for running a solution by hand;
    scoring never trusts such a script's exit code, see `eval.code_verdict`)."""
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
    prompt = item.meta.get("prompt", "") if item.meta else ""
    v = judge_code(build_candidate(item, code), item.tests, item.entry_point, prompt, timeout=sandbox_timeout)
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

    Never raises: a bad item or output (not a str, an unknown kind, a code item without tests, a
    bug met on odd input) is scored wrong with the reason in `detail`, so a run goes on and
    records it. Code items also report how many of their tests passed.
    """
    if not isinstance(text, str):
        return Score(False, None, f"the prediction is not a str but {type(text).__name__}")
    try:
        return _score(item, _clean_text(text), sandbox_timeout)
    except Exception as e:  # noqa: BLE001 - one odd item must never abort a run
        logger.warning("scoring item %r failed: %s: %s", getattr(item, "id", "?"), type(e).__name__, e)
        return Score(False, None, f"scoring failed: {type(e).__name__}: {str(e)[:300]}")
