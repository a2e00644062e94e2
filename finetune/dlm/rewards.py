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
from typing import TYPE_CHECKING, Any

import numpy as np

from finetune.dlm.reward_parts import (
    MAX_COMPLETION_CHARS,
    PENALTY,
    RewardFn,
    column,
    completion_text,
    guarded,
    n_completions,
    parsed_actions,
)

if TYPE_CHECKING:
    from finetune.dlm.return_model import ReturnModel

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


def format_reward(completions: Any = None, **kwargs: Any) -> list[float]:
    """+1 when the completion is exactly one action word of the environment, else `PENALTY`."""
    n = n_completions(completions)
    acts = parsed_actions(completions, envs=column(kwargs, "env", n=n))
    return guarded(lambda k: 1.0 if acts[k] is not None else PENALTY, n=n)


def legality_reward(completions: Any = None, **kwargs: Any) -> list[float]:
    """+1 when the parsed action is in this agent's legal set for the state, else `PENALTY`."""
    n = n_completions(completions)
    acts, legal = parsed_actions(completions, envs=column(kwargs, "env", n=n)), column(kwargs, "legal", n=n)
    return guarded(lambda k: 1.0 if acts[k] is not None and acts[k] in legal[k] else PENALTY, n=n)


def make_agreement_reward(tiers: tuple[str, ...] | list[str] = ("good",)) -> RewardFn:
    """+1 when the parsed action equals the dataset action of a sample from `tiers`, 0 when it differs.

    Samples from other tiers score None (TRL leaves that reward out for them), so noisy behaviour
    (the poor tier is 80% random actions) is never an imitation target. `PENALTY` when unparseable.
    """
    allowed = set(tiers)

    def agreement_reward(completions: Any = None, **kwargs: Any) -> list[float | None]:
        n = n_completions(completions)
        acts, ref = (
            parsed_actions(completions, envs=column(kwargs, "env", n=n)),
            column(kwargs, "action", n=n),
        )
        tier = kwargs.get("tier")
        tier = list(tier) if isinstance(tier, (list, tuple)) and len(tier) == n else [None] * n

        def score(k: int) -> float:
            if acts[k] is None:
                return PENALTY
            return 1.0 if acts[k] == int(ref[k]) else 0.0

        out: list[float | None] = list(guarded(score, n=n))
        for k in range(n):
            if tier[k] is not None and tier[k] not in allowed and acts[k] is not None:
                out[k] = None
        return out

    return agreement_reward


agreement_reward = make_agreement_reward(("good", "medium", "poor", "random"))  # every tier: plain agreement


def make_return_model_reward(model: ReturnModel | dict[str, ReturnModel]) -> RewardFn:
    """tanh of the return model's advantage of the completion's action; `PENALTY` if unparseable or illegal.

    `model` is a `return_model.ReturnModel` fit on the offline data (or a dict of them by environment):
    Q(o, a) - mean over legal actions,
    in units of the return-to-go standard deviation, squashed to (-1, 1) so every legal action scores
    above the penalty whatever the environment's reward scale.
    """

    def return_model_reward(completions: Any = None, **kwargs: Any) -> list[float]:
        n = n_completions(completions)
        envs = column(kwargs, "env", n=n)
        acts = parsed_actions(completions, envs=envs)
        obs, legal = column(kwargs, "obs", n=n), column(kwargs, "legal", n=n)

        def score(k: int) -> float:
            if acts[k] is None or acts[k] not in legal[k]:
                return PENALTY
            m = model[envs[k]] if isinstance(model, dict) else model
            return float(np.tanh(m.advantage(json.loads(obs[k]), list(legal[k]), acts[k])))

        return guarded(score, n=n)

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
