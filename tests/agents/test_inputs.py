"""`agents.run` refuses malformed question lists before any model work, with a message naming the fix."""

from __future__ import annotations

import pytest

import agents


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ("abc", "single str"),  # would otherwise run "a", "b", "c"
        (b"abc", "single bytes"),
        ([None], "#0 is NoneType"),
        ([123], "#0 is int"),
        (["ok", 4.5, None], "#1 is float, #2 is NoneType"),
        ([], "empty"),
        ({"q": 1}, "got dict"),
        (iter(["a"]), "list_iterator"),
    ],
)
def test_bad_questions_are_refused_before_the_model_runs(questions, message):
    sentinel = object()  # never touched: validation comes first
    with pytest.raises(ValueError, match=message):
        agents.run("sequential", sentinel, questions)
