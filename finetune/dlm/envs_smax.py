"""SMAX (the JAX re-implementation of SMAC in `jaxmarl`) behind the DLM adapter interface, plus its expert.

A SMAC-like benchmark that needs no StarCraft II binary: allies are the agents, enemies follow jaxmarl's
built-in heuristic (`HeuristicEnemySMAX`). Not SC2-identical (dynamics and the enemy AI differ), so
numbers are not comparable with SMAC papers. Scenarios: jaxmarl's maps (`3m`, `2s3z`, `3s5z`, `8m`,
`5m_vs_6m`, `3s_vs_5z`, ...) plus `3s_vs_3z`, registered here because the DLM paper tests it zero-shot.

Actions (jaxmarl's discrete order): north (+y), east (+x), south (-y), west (-x), stop, then
`shoot<k>` for enemy k (1-based, at most 10 enemies). Legal actions are jaxmarl's `get_avail_actions`
(moves while alive, stop always, shooting an enemy alive and in range). Observation of ally i: its unit
type and health; every living unit within its sight range as type, health and offset (x, y rounded to 0.5).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from finetune.dlm.env_api import check_actions
from latent.entry import install_line

__all__ = ["MAX_ENEMIES", "SMAX_ACTIONS", "SmaxEnv", "smax_expert"]

MAX_ENEMIES = 10
SMAX_ACTIONS = ("north", "east", "south", "west", "stop", *(f"shoot{k}" for k in range(1, MAX_ENEMIES + 1)))
UNIT_NAMES = ("marine", "marauder", "stalker", "zealot", "zergling", "hydralisk")
_MOVES = {0: (0.0, 1.0), 1: (1.0, 0.0), 2: (0.0, -1.0), 3: (-1.0, 0.0)}
_NAME = re.compile(r"^[0-9a-z_]+$")
# jaxmarl jit-compiles its methods with the environment object as a static argument, so every new object
# compiles them again (~12 s on one core); its environments are stateless, so one object per scenario is
# shared by every `SmaxEnv` (an evaluation builds one `SmaxEnv` per episode).
_JAXMARL_ENVS: dict[str, Any] = {}


def _register_extra_maps() -> None:
    import jax.numpy as jnp
    from jaxmarl.environments.smax import Scenario, register_scenario
    from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

    if "3s_vs_3z" not in MAP_NAME_TO_SCENARIO:  # 3 stalkers vs 3 zealots (SMAC's 3s_vs_3z)
        register_scenario(
            "3s_vs_3z", Scenario(jnp.array([2, 2, 2, 3, 3, 3], dtype=jnp.uint8), 3, 3, False, False)
        )


class SmaxEnv:
    """One SMAX battle (see the module docstring); the state lives in jaxmarl's immutable pytree."""

    env_name = "smax"
    action_names = SMAX_ACTIONS
    fallback_action = 4  # stop is always legal

    def __init__(self, scenario: str, half_res: float = 0.5) -> None:
        try:
            import jax
            from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario
            from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO
        except ImportError as err:
            raise ImportError(
                f"the SMAX adapter needs jaxmarl, of the dlm-smax extra (JAX on CPU is enough): {install_line('dlm-smax')}"
            ) from err
        _register_extra_maps()
        if not _NAME.match(scenario) or scenario not in MAP_NAME_TO_SCENARIO:
            raise ValueError(
                f"unknown smax scenario {scenario!r}: choose one of {sorted(MAP_NAME_TO_SCENARIO)}."
            )
        sc = map_name_to_scenario(scenario)
        if sc.num_enemies > MAX_ENEMIES or sc.smacv2_position_generation:
            raise ValueError(
                f"smax scenario {scenario!r}: at most {MAX_ENEMIES} enemies and fixed unit types."
            )
        self._jax = jax
        self.scenario = scenario
        if scenario not in _JAXMARL_ENVS:
            _JAXMARL_ENVS[scenario] = HeuristicEnemySMAX(scenario=sc)
        self._env = _JAXMARL_ENVS[scenario]
        self.n_agents = self._env.num_allies
        self.n_enemies = self._env.num_enemies
        self.max_steps = int(self._env._env.max_steps)
        self.res = half_res
        self._state = None
        self._key = None
        self._done = False
        self._won = False

    def reset(self, seed: int) -> None:
        """Reset to a battle drawn from `seed` (the seed also drives every later step's randomness)."""
        self._key = self._jax.random.PRNGKey(int(seed))
        self._key, sub = self._jax.random.split(self._key)
        _, self._state = self._env.reset(sub)
        self._done, self._won = False, False

    def _arrays(self) -> dict[str, np.ndarray]:
        s = self._state.state
        return {
            "pos": np.asarray(s.unit_positions, dtype=float),
            "alive": np.asarray(s.unit_alive, dtype=bool),
            "health": np.asarray(s.unit_health, dtype=float),
            "types": np.asarray(s.unit_types, dtype=int),
        }

    def _round(self, v: float) -> float:
        return float(np.round(v / self.res) * self.res)

    def observations(self) -> list[dict[str, Any]]:
        """Per ally: unit type and health, and every living unit in its sight range as type, health and offset."""
        a = self._arrays()
        full = np.asarray(self._env._env.unit_type_health)
        sight = np.asarray(self._env._env.unit_type_sight_ranges)
        out = []
        for i in range(self.n_agents):
            me = {
                "type": UNIT_NAMES[a["types"][i]],
                "health": int(round(100 * a["health"][i] / full[a["types"][i]])),
            }

            def seen(lo: int, hi: int, i=i) -> list[dict[str, Any]]:
                rows = []
                for j in range(lo, hi):
                    if j == i or not a["alive"][j] or not a["alive"][i]:
                        continue
                    d = a["pos"][j] - a["pos"][i]
                    if np.linalg.norm(d) < sight[a["types"][i]]:
                        rows.append(
                            {
                                "id": j - lo + 1,
                                "type": UNIT_NAMES[a["types"][j]],
                                "health": int(round(100 * a["health"][j] / full[a["types"][j]])),
                                "dx": self._round(d[0]),
                                "dy": self._round(d[1]),
                            }
                        )
                return rows

            me["enemies"] = seen(self.n_agents, self.n_agents + self.n_enemies)
            me["allies"] = seen(0, self.n_agents)
            out.append(me)
        return out

    def legal_actions(self) -> list[list[int]]:
        """Per ally, jaxmarl's available actions as sorted indices."""
        avail = self._env.get_avail_actions(self._state)
        return [
            sorted(int(k) for k in np.nonzero(np.asarray(avail[f"ally_{i}"]))[0])
            for i in range(self.n_agents)
        ]

    def step(self, actions: list[int]) -> tuple[list[float], bool]:
        """Execute one legal action per ally without jaxmarl's auto-reset, so the outcome stays readable."""
        check_actions(self, actions)
        self._key, sub = self._jax.random.split(self._key)
        acts = {f"ally_{i}": int(a) for i, a in enumerate(actions)}
        # step_env, not step: jaxmarl's step auto-resets a finished battle, which would hide its outcome
        _, self._state, rewards, dones, _ = self._env.step_env(sub, self._state, acts)
        a = self._arrays()
        self._done = bool(dones["__all__"])
        self._won = bool(not a["alive"][self.n_agents :].any())
        return [float(rewards[f"ally_{i}"]) for i in range(self.n_agents)], self._done

    def won(self) -> bool:
        """True when the last step left every enemy dead."""
        return self._won

    def team_reward(self, rewards: list[float]) -> float:
        """SMAX's ally reward is shared by the team (damage dealt plus the win bonus), so take one agent's."""
        return float(rewards[0]) if rewards else 0.0

    def get_state(self) -> dict[str, Any]:
        """Unit positions, alive flags, health and the step count: a JSON summary, not a restorable state."""
        a = self._arrays()
        return {
            "pos": a["pos"].round(3).tolist(),
            "alive": a["alive"].tolist(),
            "health": a["health"].round(2).tolist(),
            "t": int(np.asarray(self._state.state.step)),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Always raises: a SMAX battle cannot be restored from its JSON summary."""
        raise NotImplementedError(
            "SMAX states cannot be restored from their JSON summary (the heuristic enemy and the jaxmarl "
            "pytree carry more); the offline GRPO rewards never need it, `return_reward=online` does."
        )


def smax_expert(env: SmaxEnv, rng: np.random.Generator) -> list[int]:
    """Focus fire: shoot the weakest enemy in range; else walk along the larger axis to the nearest enemy."""
    a = env._arrays()
    legal = env.legal_actions()
    acts = []
    for i in range(env.n_agents):
        shoot = [k for k in legal[i] if k >= 5]
        if shoot:
            acts.append(min(shoot, key=lambda k: (a["health"][env.n_agents + k - 5], k)))
            continue
        alive = [j for j in range(env.n_agents, env.n_agents + env.n_enemies) if a["alive"][j]]
        if not a["alive"][i] or not alive:
            acts.append(4)
            continue
        j = min(alive, key=lambda j: float(np.linalg.norm(a["pos"][j] - a["pos"][i])))
        d = a["pos"][j] - a["pos"][i]
        move = (1 if d[0] > 0 else 3) if abs(d[0]) >= abs(d[1]) else (0 if d[1] > 0 else 2)
        acts.append(move if move in legal[i] else 4)
    return acts
