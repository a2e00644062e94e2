"""Offline GRPO reward functions: format, legality, agreement with good-tier actions, learned return.

Everything here reads the GRPO dataset's columns (and a return model fit on the offline data) only: no
simulator is built or stepped, which is what the offline setting requires. The one reward that replays
states in the simulator lives in `rewards_online.py` and is opt-in (`grpo.return_reward=online`).

TRL calls each as `f(prompts=..., completions=..., <dataset columns>=..., **kwargs)` with one entry per
completion. A reward function must never raise inside a training step, so every per-sample score is
computed under a guard that turns any failure (garbage, empty, over-long or non-string completions,
malformed columns) into the penalty `PENALTY`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from finetune.dlm.dialogue import parse_action

__all__ = [
    "MAX_COMPLETION_CHARS",
    "PENALTY",
    "agreement_reward",
    "completion_text",
    "format_reward",
    "legality_reward",
    "make_agreement_reward",
    "make_return_model_reward",
    "reward_functions",
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


def _column(kwargs: dict[str, Any], name: str, n: int) -> list[Any]:
    col = kwargs.get(name)
    return list(col) if isinstance(col, (list, tuple)) and len(col) == n else [None] * n


def _guarded(score: Callable[[int], float], n: int) -> list[float]:
    out = []
    for k in range(n):
        try:
            val = float(score(k))
            out.append(val if np.isfinite(val) else PENALTY)
        except Exception as err:  # a reward must not crash a training step; log and penalise
            logger.debug("reward failed on sample %d: %r", k, err)
            out.append(PENALTY)
    return out


def _parsed(completions: Any, envs: list[Any]) -> list[int | None]:
    comps = list(completions) if isinstance(completions, (list, tuple)) else []
    res = []
    for k, env_name in enumerate(envs):
        text = completion_text(comps[k]) if k < len(comps) else None
        try:
            res.append(parse_action(env_name, text) if text is not None else None)
        except ValueError:
            res.append(None)
    return res


def _n(completions: Any) -> int:
    return len(completions) if isinstance(completions, (list, tuple)) else 0


def format_reward(completions: Any = None, **kwargs: Any) -> list[float]:
    """+1 when the completion is exactly one action word of the environment, else `PENALTY`."""
    n = _n(completions)
    acts = _parsed(completions, _column(kwargs, "env", n))
    return _guarded(lambda k: 1.0 if acts[k] is not None else PENALTY, n)


def legality_reward(completions: Any = None, **kwargs: Any) -> list[float]:
    """+1 when the parsed action is in this agent's legal set for the state, else `PENALTY`."""
    n = _n(completions)
    acts, legal = _parsed(completions, _column(kwargs, "env", n)), _column(kwargs, "legal", n)
    return _guarded(lambda k: 1.0 if acts[k] is not None and acts[k] in legal[k] else PENALTY, n)


def make_agreement_reward(tiers: tuple[str, ...] | list[str] = ("good",)) -> RewardFn:
    """+1 when the parsed action equals the dataset action of a sample from `tiers`, 0 when it differs.

    Samples from other tiers score None (TRL leaves that reward out for them), so noisy behaviour
    (the poor tier is 80% random actions) is never an imitation target. `PENALTY` when unparseable.
    """
    allowed = set(tiers)

    def agreement_reward(completions: Any = None, **kwargs: Any) -> list[float | None]:
        n = _n(completions)
        acts, ref = _parsed(completions, _column(kwargs, "env", n)), _column(kwargs, "action", n)
        tier = kwargs.get("tier")
        tier = list(tier) if isinstance(tier, (list, tuple)) and len(tier) == n else [None] * n

        def score(k: int) -> float:
            if acts[k] is None:
                return PENALTY
            return 1.0 if acts[k] == int(ref[k]) else 0.0

        out: list[float | None] = list(_guarded(score, n))
        for k in range(n):
            if tier[k] is not None and tier[k] not in allowed and acts[k] is not None:
                out[k] = None
        return out

    return agreement_reward


agreement_reward = make_agreement_reward(("good", "medium", "poor", "random"))  # every tier: plain agreement


def make_return_model_reward(model) -> RewardFn:
    """tanh of the return model's advantage of the completion's action; `PENALTY` if unparseable or illegal.

    `model` is a `return_model.ReturnModel` fit on the offline data (or a dict of them by environment):
    Q(o, a) - mean over legal actions,
    in units of the return-to-go standard deviation, squashed to (-1, 1) so every legal action scores
    above the penalty whatever the environment's reward scale.
    """

    def return_model_reward(completions: Any = None, **kwargs: Any) -> list[float]:
        n = _n(completions)
        envs = _column(kwargs, "env", n)
        acts = _parsed(completions, envs)
        obs, legal = _column(kwargs, "obs", n), _column(kwargs, "legal", n)

        def score(k: int) -> float:
            if acts[k] is None or acts[k] not in legal[k]:
                return PENALTY
            m = model[envs[k]] if isinstance(model, dict) else model
            return float(np.tanh(m.advantage(json.loads(obs[k]), list(legal[k]), acts[k])))

        return _guarded(score, n)

    return return_model_reward


def reward_functions(
    return_reward: str = "model",
    agreement_tiers: tuple[str, ...] | list[str] = ("good",),
    return_model: Any = None,
    env_horizon: int = 3,
) -> list[RewardFn]:
    """The GRPO rewards in `GRPORunConfig.reward_weights` order: format, legality, agreement, return.

    `return_reward`: 'model' (offline: the fitted `return_model`), 'none' (three rewards), or 'online'
    (replays logged states in the simulator: not offline, opt-in only).
    """
    funcs: list[RewardFn] = [format_reward, legality_reward, make_agreement_reward(agreement_tiers)]
    if return_reward == "model":
        if return_model is None:
            raise ValueError("`return_reward=model` needs a return model fit on the offline data.")
        funcs.append(make_return_model_reward(return_model))
    elif return_reward == "online":
        from finetune.dlm.rewards_online import make_env_return_reward

        funcs.append(make_env_return_reward(env_horizon))
    elif return_reward != "none":
        raise ValueError(f"`return_reward` must be 'model', 'none' or 'online', got {return_reward!r}.")
    return funcs
