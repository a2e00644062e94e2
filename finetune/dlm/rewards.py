"""GRPO reward functions: format, legality, agreement with the dataset action, short-horizon env return.

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
from finetune.dlm.envs import MultiAgentEnv, make_env
from finetune.dlm.policies import expert_actions

__all__ = [
    "MAX_COMPLETION_CHARS",
    "PENALTY",
    "agreement_reward",
    "completion_text",
    "format_reward",
    "legality_reward",
    "make_env_return_reward",
    "reward_functions",
]

logger = logging.getLogger(__name__)

PENALTY = -1.0
MAX_COMPLETION_CHARS = 32  # an action word is < 8 characters; anything this long is rambling

RewardFn = Callable[..., list[float]]


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


def agreement_reward(completions: Any = None, **kwargs: Any) -> list[float]:
    """+1 when the parsed action equals the dataset (behaviour) action, 0 otherwise, `PENALTY` if unparseable."""
    n = _n(completions)
    acts, ref = _parsed(completions, _column(kwargs, "env", n)), _column(kwargs, "action", n)

    def score(k: int) -> float:
        if acts[k] is None:
            return PENALTY
        return 1.0 if acts[k] == int(ref[k]) else 0.0

    return _guarded(score, n)


def make_env_return_reward(horizon: int = 3) -> RewardFn:
    """Short-horizon return of the completion's action relative to the dataset action, squashed to (-1, 1).

    From the logged state, this agent plays the completion's action (then, for comparison, the logged
    action), teammates their logged actions, then everyone follows the scripted expert for the rest of the
    `horizon`. The score is tanh(R_completion - R_logged): centred on the behaviour policy and bounded, so
    every legal completion scores above `PENALTY` whatever the environment's reward scale (MPE returns
    are about -1 per step, LBF's are in [0, 1]). Unparseable or illegal completions get `PENALTY`.
    """
    if horizon < 1:
        raise ValueError(f"`horizon` must be >= 1, got {horizon}.")
    cache: dict[tuple[str, str], MultiAgentEnv] = {}

    def rollout(env: MultiAgentEnv, state: dict[str, Any], joint: list[int], seed: int) -> float:
        env.set_state(state)
        rng = np.random.default_rng(seed)
        total, done = 0.0, False
        for step in range(horizon):
            if done:
                break
            rewards, done = env.step(joint if step == 0 else expert_actions(env, rng))
            total += env.team_reward(rewards)
        return total

    def env_return_reward(completions: Any = None, **kwargs: Any) -> list[float]:
        n = _n(completions)
        envs = _column(kwargs, "env", n)
        acts = _parsed(completions, envs)
        cols = {c: _column(kwargs, c, n) for c in ("scenario", "state", "joint_actions", "agent", "legal")}

        def score(k: int) -> float:
            if acts[k] is None or acts[k] not in cols["legal"][k]:
                return PENALTY
            key = (envs[k], cols["scenario"][k])
            if key not in cache:
                cache[key] = make_env(*key)
                cache[key].reset(0)
            state = json.loads(cols["state"][k])
            logged = list(cols["joint_actions"][k])
            mine = list(logged)
            mine[int(cols["agent"][k])] = acts[k]
            gain = rollout(cache[key], state, mine, k) - rollout(cache[key], state, logged, k)
            return float(np.tanh(gain))

        return _guarded(score, n)

    return env_return_reward


def reward_functions(env_horizon: int = 3) -> list[RewardFn]:
    """The four GRPO rewards in `GRPORunConfig.reward_weights` order; env return is omitted when horizon is 0."""
    funcs: list[RewardFn] = [format_reward, legality_reward, agreement_reward]
    if env_horizon > 0:
        funcs.append(make_env_return_reward(env_horizon))
    return funcs
