"""Checks on what callers pass to `agents.run`, before any model work starts."""

from __future__ import annotations

from collections.abc import Sequence


def check_questions(questions: object) -> None:
    """Raise a ValueError naming the problem and the fix unless `questions` is a non-empty list of str.

    A bare string is refused rather than iterated (it would run one question per character).
    """
    if isinstance(questions, str | bytes):
        raise ValueError(
            f"`questions` must be a list of str, got a single {type(questions).__name__}; "
            "wrap it in a list: agents.run(graph, model, [question])."
        )
    if not isinstance(questions, Sequence):
        raise ValueError(
            f"`questions` must be a list of str, got {type(questions).__name__}; pass list(...) of your questions."
        )
    if not questions:
        raise ValueError("`questions` is empty: nothing to run.")
    bad = [(i, q) for i, q in enumerate(questions) if not isinstance(q, str)]
    if bad:
        shown = ", ".join(f"#{i} is {type(q).__name__}" for i, q in bad[:3])
        raise ValueError(
            f"every question must be a str: {shown}{' ...' if len(bad) > 3 else ''}. "
            "Convert them first, e.g. [str(q) for q in questions]."
        )
