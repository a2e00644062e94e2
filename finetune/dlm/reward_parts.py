"""The pieces every GRPO reward shares (the offline ones in `rewards.py`, the online one in
`rewards_online.py`): reading TRL's columns, parsing a completion to an action, and the guard that turns
any per-sample failure into `PENALTY`. It stands below both reward modules so neither imports the other's
internals."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from finetune.dlm.dialogue import parse_action

__all__ = [
    "MAX_COMPLETION_CHARS",
    "PENALTY",
    "RewardFn",
    "column",
    "completion_text",
    "guarded",
    "n_completions",
    "parsed_actions",
]

logger = logging.getLogger(__name__)

PENALTY = -1.0
MAX_COMPLETION_CHARS = 32  # an action word is < 8 characters; anything this long is rambling

RewardFn = Callable[..., list[float | None]]


def completion_text(completion: Any) -> str | None:
    """The text of one TRL completion (a string or `[{"role": "assistant", "content": ...}]`), else None."""
    if isinstance(completion, str):
        text = completion
    elif isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        text = completion[-1].get("content")
    else:
        return None
    if not isinstance(text, str) or len(text) > MAX_COMPLETION_CHARS:
        return None
    return text


def column(kwargs: dict[str, Any], name: str, *, n: int) -> list[Any]:
    """Dataset column `name` from TRL's keyword arguments, or `n` Nones when it is missing or malformed."""
    col = kwargs.get(name)
    return list(col) if isinstance(col, (list, tuple)) and len(col) == n else [None] * n


def guarded(score: Callable[[int], float], *, n: int) -> list[float]:
    """`score(k)` for each of the `n` samples; a failure or a non-finite value scores `PENALTY`."""
    out = []
    for k in range(n):
        try:
            val = float(score(k))
            out.append(val if np.isfinite(val) else PENALTY)
        except Exception as err:  # a reward must not crash a training step; log and penalise
            logger.debug("reward failed on sample %d: %r", k, err)
            out.append(PENALTY)
    return out


def parsed_actions(completions: Any, *, envs: list[Any]) -> list[int | None]:
    """The action index each completion names in its environment, None when it names none."""
    comps = list(completions) if isinstance(completions, (list, tuple)) else []
    res = []
    for k, env_name in enumerate(envs):
        text = completion_text(comps[k]) if k < len(comps) else None
        try:
            res.append(parse_action(env_name, text) if text is not None else None)
        except ValueError:
            res.append(None)
    return res


def n_completions(completions: Any) -> int:
    """How many completions TRL passed (0 for anything but a list or tuple)."""
    return len(completions) if isinstance(completions, (list, tuple)) else 0
