"""Which option letter a multiple-choice response commits to (rules and ambiguity policy: eval/scoring/README.md).

Order: the last non-empty `\\boxed{}` (a letter or an option's text); else the latest commitment in
the text ("the answer is (C)", "Answer: b", "I'll go with D", "the best is B", "it must be C", a
final line that is just "B."), skipping negated and rejected ones ("I would not choose A", "Option A
is incorrect"), and giving no answer
when a hedge ("torn between (A) and (C)", "A or C") comes after it; else the option text named after
the last "answer is"; else the only letter marked "(B)" on the final line; else the only option
whose text the last sentence names ("The largest ocean on Earth is the Pacific Ocean.").
"""

from __future__ import annotations

import re

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_N_CHOICES = 5  # letters A-E accepted when an item does not list its options
# An output longer than this (about 25,000 tokens of prose) is wrong unread, by `eval.scoring.score` and
# by every public reader on its own: each extraction step is linear, but linear in 10 MB is seconds of
# Python per rule, and 200,000 characters of dense commitments took 0.25 s alone, over 2 s on a
# contended 2-core machine.
MAX_OUTPUT_CHARS = 100_000

_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_TOKEN = r"(?P<open>\*\*|__|[\(\[\{])?\s?(?P<letter>[A-Za-z])(?P<close>\*\*|__|[\)\]\}])?(?![A-Za-z0-9'’])"
_COMMIT_RE = re.compile(
    r"(?:(?:final|correct|right|best)\s++)?(?:answer|option|choice)s?"
    r"(?:\s++(?:is|would\s++be|will\s++be|should\s++be|must\s++be|has\s++to\s++be|=))?"
    r"|(?:the\s++)?best(?:\s++(?:one|fit|match|option|choice))?\s++(?:is|would\s++be)"
    r"|(?:correct|right)\s++one\s++is"
    r"|(?:go|going)\s++with|opt\s++for"
    r"|\b(?:choose|pick|select|chose|picked|selected|guess)"
    r"|\b(?:it|this|that)\s++(?:is|must\s++be|has\s++to\s++be|would\s++be|should\s++be)|\bit['’]s"
    r"|\bmust\s++be",
    re.IGNORECASE,
)
_FILLER_RE = re.compile(r"\s*+(?:(?:option|choice|letter)\s*+)?[:：=\-–]?\s*+", re.IGNORECASE)
_TOKEN_RE = re.compile(_TOKEN)
_NEGATION_RE = re.compile(r"(?:\bnot|n['’]t|\bnever)\s*+(?:\w+\s*+){0,3}$", re.IGNORECASE)
_HEDGE_RE = re.compile(
    rf"\bbetween\s++{_TOKEN.replace('?P<', '?P<a')}\s*+(?:and|or)\s++{_TOKEN.replace('?P<', '?P<b')}"
    rf"|\beither\s++{_TOKEN.replace('?P<', '?P<c')}\s*+or\s++{_TOKEN.replace('?P<', '?P<d')}"
    rf"|(?<![A-Za-z]){_TOKEN.replace('?P<', '?P<e')}\s++or\s++{_TOKEN.replace('?P<', '?P<f')}",
    re.IGNORECASE,
)
# A letter followed by a verdict against it is a rejection, not a commitment ("Option A is incorrect").
# A list of letters shares the verdict: "Options A, C and D are incorrect" rejects A too.
_REJECTED_AFTER_RE = re.compile(
    r"(?:[\s)\]*]*+(?:,|/|&|\band\b|\bor\b|\bnor\b)\s*+[(\[]?[A-Za-z](?![A-Za-z]))*+"
    r"[\s)\]*:]*(?:(?:is|are|was|were|seems|seem|looks|look|appears|appear|would\s+be|must\s+be|can\s+be)\s+)?"
    r"(?:not\b|n['’]t\b|incorrect|wrong|false\b|invalid|unlikely|impossible|ruled\s+out|eliminated|excluded)",
    re.IGNORECASE,
)


def rejected(text: str, end: int) -> bool:
    """Whether the option letter ending at `end` is followed by a verdict against it."""
    return _REJECTED_AFTER_RE.match(text[end : end + 80]) is not None


# Words after a bare capital "A" (or "I") that make it an option ("A is correct") rather than prose ("A lot").
_OPTION_VERBS = {"is", "was", "seems", "appears", "because", "since", "as", "and", "or", "which", "fits"}
_OPTION_VERBS |= {"matches", "would", "should", "must", "can", "looks", "best", "correctly", "for"}


def letters_for(choices: list[str] | None) -> str:
    n = len(choices) if choices else DEFAULT_N_CHOICES
    return LETTERS[: max(1, min(n, 26))]


def _option_norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", _TEXT_CMD_RE.sub(r"\1", s).lower()).strip()


def _is_prose(letter: str, marked: bool, after: str) -> bool:
    """A lone letter that is really a word: "a prime", "A lot of", "I think"."""
    if marked:
        return False
    word = re.match(r"\s++([A-Za-z]+)", after)
    if letter.islower():
        return word is not None  # "answer is a bit tricky"; "Answer: b" stands alone
    if letter in "AI" and word and word.group(1)[0].islower():
        return word.group(1).lower() not in _OPTION_VERBS
    return False


_PROSE_WINDOW = 64  # what `_is_prose` reads after a letter: a space and one word


def _token_letter(m: re.Match, text: str, valid: str, prefix: str = "") -> str | None:
    letter = m.group(prefix + "letter")
    marked = bool(m.group(prefix + "open") or m.group(prefix + "close"))
    # a window, not `text[m.end():]`: a copy of the rest of the text per commitment was quadratic
    if _is_prose(letter, marked, text[m.end() : m.end() + _PROSE_WINDOW]):
        return None
    return letter.upper() if letter.upper() in valid else None


def letter_only(s: str, valid: str) -> str | None:
    """'B', '(b)', 'B.', '**B**', '\\text{B}', 'B) Paris', 'Option B' -> 'B'."""
    t = _TEXT_CMD_RE.sub(r"\1", s).strip().strip("*_`$ ").strip()
    m = re.fullmatch(
        r"(?:option|choice|letter)?\s*[\(\[]?([A-Za-z])[\)\]]?[.:)]?(?:\s+.*)?", t, re.IGNORECASE | re.DOTALL
    )
    if not m:
        return None
    letter, rest = m.group(1), t[m.end(1) :]
    marked = (
        bool(re.match(r"[\)\].:]", rest)) or t[:1] in "([" or bool(re.match(r"(?i)option|choice|letter", t))
    )
    if _is_prose(letter, marked, rest):
        return None
    if letter.isupper() and re.match(r"\s+[a-z]", rest) and not marked:
        return None  # "A number ..." is prose too
    return letter.upper() if letter.upper() in valid else None


def match_option_text(s: str, choices: list[str] | None) -> str | None:
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
    if contained:  # prefer the longest match when one option's text contains another's ("2" in "12")
        longest = max(contained, key=lambda i: len(norms[i]))
        if not [i for i in contained if i != longest and norms[i] not in norms[longest]]:
            return LETTERS[longest]
    return None


def _commitments(text: str, valid: str) -> list[tuple[int, str]]:
    """(position, letter) of every non-negated commitment phrase followed by an option letter."""
    found = []
    for m in _COMMIT_RE.finditer(text):
        if _NEGATION_RE.search(text[max(0, m.start() - 24) : m.start()]):
            continue  # "I would not choose A"
        f = _FILLER_RE.match(text, m.end())
        t = _TOKEN_RE.match(text, f.end())
        if t is None:
            continue
        letter = _token_letter(t, text, valid)
        if letter and not rejected(text, t.end()):
            found.append((t.start(), letter))
    return found


def _last_lines(text: str, k: int) -> list[tuple[int, str]]:
    """(start, line) of the last `k` non-blank lines, found from the end (not a list of every line)."""
    out, end = [], len(text)
    while end > 0 and len(out) < k:
        start = text.rfind("\n", 0, end) + 1
        if text[start:end].strip():
            out.append((start, text[start:end]))
        end = start - 1
    return out[::-1]


def _tail_letter_lines(text: str, valid: str) -> list[tuple[int, str | None]]:
    lines = _last_lines(text, 3)
    return [(pos, None if _line_rejects(line) else letter_only(line, valid)) for pos, line in lines]


def _line_rejects(line: str) -> bool:
    m = re.match(r"\s*(?:option|choice|letter)?\s*[(\[*]*[A-Za-z][)\]*]*", line, re.IGNORECASE)
    return m is not None and rejected(line, m.end())


def _is_listing(hits: list[tuple[int, str | None]]) -> bool:
    """Two or more of the last lines start with different option letters: the options listed again."""
    letters = [h for _, h in hits if h]
    return len(letters) >= 2 and len(set(letters)) >= 2


def _final_line_letters(text: str, valid: str) -> list[tuple[int, str]]:
    """A line near the end that is just an option ("B.", "(B)", "**B**", "B) Paris"), not a listing."""
    hits = _tail_letter_lines(text, valid)
    return [] if _is_listing(hits) else [(pos, h) for pos, h in hits if h]


def _last_hedge(text: str, valid: str) -> int:
    """Start of the last "between (A) and (C)" / "either A or C" / "A or C" naming two valid letters."""
    last = -1
    for m in _HEDGE_RE.finditer(text):
        pairs = [(p + "letter") for p in ("a", "b", "c", "d", "e", "f")]
        letters = [m.group(k).upper() for k in pairs if m.group(k)]
        if len(letters) == 2 and letters[0] != letters[1] and all(x in valid for x in letters):
            last = m.start()
    return last


def _last_sentence_option(text: str, choices: list[str] | None) -> str | None:
    """The letter of the only option whose text the last sentence names ("A spider has 8 legs.")."""
    if not choices:
        return None
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", text.strip()) if s.strip()]
    if not sentences:
        return None
    last = _option_norm(sentences[-1])
    norms = [_option_norm(c) for c in choices]
    named = {i for i, c in enumerate(norms) if c and re.search(rf"(?<![\w.]){re.escape(c)}(?![\w.])", last)}
    named = {i for i in named if not any(j != i and norms[i] in norms[j] for j in named)}  # "2" in "12"
    return LETTERS[named.pop()] if len(named) == 1 else None


def extract_choice(
    text: str,
    choices: list[str] | None,
    boxed: str | None = None,
    *,
    boxed_end: int | None = None,
    sentence_fallback: bool = True,
) -> str | None:
    """The option letter ("A".."Z", upper case) a response commits to, or None (see the module docstring).

    Only letters within the number of `choices` (A-E when unknown) count. `boxed` is the response's
    last non-empty `\\boxed{}` content, if any, ending at `boxed_end`: a commitment phrase after the
    box wins over it (the last commitment wins). `sentence_fallback=False` turns off the last rule
    (an option's text named by the last sentence), for comparisons.
    """
    if len(text) > MAX_OUTPUT_CHARS:
        return None
    valid = letters_for(choices)
    commitments = _commitments(text, valid)
    if boxed is not None:
        got = letter_only(boxed, valid) or match_option_text(boxed, choices)
        later = boxed_end is not None and any(pos >= boxed_end for pos, _ in commitments)
        if got and not later:
            return got
    candidates = commitments + _final_line_letters(text, valid)
    if candidates:
        pos, letter = max(candidates)
        return None if _last_hedge(text, valid) >= pos else letter
    if _last_hedge(text, valid) >= 0:
        return None
    phrases = list(re.finditer(r"answer\s*(?:is|:)?", text, re.IGNORECASE))
    if phrases:
        tail = text[phrases[-1].end() :].strip().split("\n")[0]
        got = match_option_text(re.split(r"\.(?!\d)|;|,\s", tail)[0], choices)
        if got:
            return got
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    marked = {m for m in re.findall(r"\(([A-Z])\)", lines[-1]) if m in valid} if lines else set()
    if len(marked) == 1:
        return marked.pop()
    if not sentence_fallback or marked or _is_listing(_tail_letter_lines(text, valid)):
        return None
    return _last_sentence_option(text, choices)
