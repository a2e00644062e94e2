"""The online return reward: replays logged states in the simulator. Not offline; opt-in only.

`grpo.return_reward=online` turns it on. It needs simulator access and rolls teammates out with the
scripted expert that generated the data (a privileged policy), which the offline setting forbids, so it
is kept for comparison only; the default offline reward is the fitted return model (`rewards.py`).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from finetune.dlm import envs
from finetune.dlm.policies import expert_actions
from finetune.dlm.reward_parts import PENALTY, RewardFn, column, guarded, n_completions, parsed_actions

__all__ = ["make_env_return_reward"]


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
    cache: dict[tuple[str, str], envs.MultiAgentEnv] = {}

    def rollout(env: envs.MultiAgentEnv, state: dict[str, Any], joint: list[int], seed: int) -> float:
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
        n = n_completions(completions)
        names = column(kwargs, "env", n=n)
        acts = parsed_actions(completions, envs=names)
        cols = {c: column(kwargs, c, n=n) for c in ("scenario", "state", "joint_actions", "agent", "legal")}

        def score(k: int) -> float:
            if acts[k] is None or acts[k] not in cols["legal"][k]:
                return PENALTY
            key = (names[k], cols["scenario"][k])
            if key not in cache:
                cache[key] = envs.make_env(*key)
                cache[key].reset(0)
            state = json.loads(cols["state"][k])
            logged = list(cols["joint_actions"][k])
            mine = list(logged)
            mine[int(cols["agent"][k])] = acts[k]
            gain = rollout(cache[key], state, mine, k) - rollout(cache[key], state, logged, k)
            return float(np.tanh(gain))

        return guarded(score, n=n)

    return env_return_reward
