"""The interface every environment adapter implements, below both the registry (`envs.make_env`) and the
adapters in their own files (`envs_rware.py`, `envs_smax.py`), so each imports it without a circle."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["IllegalActionError", "MultiAgentEnv", "check_actions"]


class IllegalActionError(ValueError):
    """An adapter was asked to execute an action outside that agent's legal set."""


class MultiAgentEnv(Protocol):
    """What the data generator, the dialogue layer and the evaluation loop need from an environment."""

    env_name: str
    scenario: str
    n_agents: int
    action_names: tuple[str, ...]
    fallback_action: int  # always legal; what the evaluation loop executes in place of an invalid action

    def reset(self, seed: int) -> None:
        """Start a new episode from the start state that `seed` determines (same seed, same start)."""

    def observations(self) -> list[dict[str, Any]]:
        """Each agent's local, JSON-serialisable observation: only what it may see at execution time."""

    def legal_actions(self) -> list[list[int]]:
        """Each agent's legal action indices in the current state."""

    def step(self, actions: list[int]) -> tuple[list[float], bool]:
        """Execute one legal action per agent (illegal ones raise); per-agent rewards and whether it ended."""

    def won(self) -> bool:
        """Whether the episode so far counts as a win under this environment's definition."""

    def team_reward(self, rewards: list[float]) -> float:
        """One team reward from a step's per-agent rewards (the sum, the mean or a shared value)."""

    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot, stored with each dataset step for `set_state` where supported."""

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue the episode from a `get_state` snapshot (used by short-horizon online returns)."""


def check_actions(env: MultiAgentEnv, actions: list[int]) -> None:
    """Raise unless `actions` holds one legal action per agent (adapters call it before stepping)."""
    if len(actions) != env.n_agents:
        raise ValueError(f"expected {env.n_agents} actions (one per agent), got {len(actions)}.")
    for i, (a, legal) in enumerate(zip(actions, env.legal_actions())):
        if int(a) not in legal:
            raise IllegalActionError(
                f"agent {i} action {a} is not legal here (legal: {legal}); the caller must replace invalid "
                "actions with `fallback_action` and count them."
            )
