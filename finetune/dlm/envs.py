"""Multi-agent environment adapters behind one small interface (local observations + legal actions).

Every adapter exposes structured, JSON-serialisable *local* observations per agent (what that agent
may see at execution time), the legal action set per agent, and a step that refuses illegal actions.
The refusal is deliberate: the evaluation loop must count and replace an illegal action itself, so an
adapter that silently turned it into a no-op (as `lbforaging` does) would hide invalid actions.

Environments:
- `lbforaging`: Level-Based Foraging (`lbforaging` 2.0), the DLM paper's benchmark. Scenarios are the
  registered ids without the `Foraging-`/`-v3` wrapping, e.g. `6x6-2p-2f`, `11x11-6p-4f`, `8x8-3p-2f-coop`,
  `10x10-3p-3f-2s` (partial observability, sight 2).
- `mpe`: Multi-Particle Environment `simple_spread` (`mpe2` 1.1), scenarios `spread-<N>` for N agents
  and N landmarks, discrete actions.
- `rware`: Multi-Robot Warehouse (`rware` 2.0), scenarios `tiny-2ag`, `small-4ag-hard`, ... (`envs_rware.py`).
- `smax`: SMAX from `jaxmarl` (SMAC-like, no game binary), scenarios `3m`, `2s3z`, `3s_vs_3z`, ... (`envs_smax.py`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from finetune.dlm.env_api import IllegalActionError, MultiAgentEnv, check_actions

__all__ = ["ENV_NAMES", "IllegalActionError", "LBFEnv", "MPESpreadEnv", "MultiAgentEnv", "make_env"]

ENV_NAMES = ("lbforaging", "mpe", "rware", "smax")

LBF_ACTIONS = ("none", "north", "south", "west", "east", "load")
MPE_ACTIONS = ("stay", "left", "right", "down", "up")  # mpe2 discrete order: no-op, -x, +x, -y, +y


# ---------------------------------------------------------------------------------------------- LBF
_LBF_RE = re.compile(r"^(?:Foraging-)?(\d+)x\1-(\d+)p-(\d+)f(-coop)?(-2s)?(?:-v3)?$")


def _lbf_kwargs(scenario: str) -> dict[str, Any]:
    m = _LBF_RE.match(scenario)
    if m is None:
        raise ValueError(
            f"unknown lbforaging scenario {scenario!r}: use '<S>x<S>-<P>p-<F>f[-coop][-2s]', "
            "e.g. '6x6-2p-2f' or '11x11-6p-4f'."
        )
    size, players, foods = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (5 <= size <= 19 and 2 <= players <= 9 and 1 <= foods <= 4):
        raise ValueError(
            f"lbforaging scenario {scenario!r} is outside the registered range "
            "(grid 5-19, players 2-9, foods 1-4)."
        )
    return {
        "players": players,
        "min_player_level": 1,
        "max_player_level": 2,
        "field_size": (size, size),
        "min_food_level": 1,
        "max_food_level": None,
        "max_num_food": foods,
        "sight": 2 if m.group(5) else size,
        "max_episode_steps": 50,
        "force_coop": bool(m.group(4)),
        "grid_observation": False,
        "penalty": 0.0,
    }


class LBFEnv:
    """Level-Based Foraging with egocentric local observations and strict legality.

    Observation of agent i: its own level; every food and teammate within its sight as offsets
    (`dr` rows, positive = south; `dc` columns, positive = east) plus level. Offsets rather than absolute
    cells make the text independent of grid size, which is what zero-shot transfer to unseen sizes needs.
    Team return is normalised by lbforaging to 1.0 when all food is collected; a win is all food collected.
    """

    env_name = "lbforaging"
    action_names = LBF_ACTIONS
    fallback_action = 0  # NONE is always legal in LBF

    def __init__(self, scenario: str) -> None:
        from lbforaging.foraging.environment import ForagingEnv

        self.scenario = scenario
        self._env = ForagingEnv(**_lbf_kwargs(scenario))
        self.n_agents = len(self._env.players)
        self.max_steps = self._env._max_episode_steps

    def reset(self, seed: int) -> None:
        """Reset to the seeded lbforaging start layout."""
        self._env.reset(seed=int(seed))

    @property
    def t(self) -> int:
        """Steps taken in this episode."""
        return int(self._env.current_step)

    def observations(self) -> list[dict[str, Any]]:
        """Per agent: its level and the food and teammates within sight, as offsets sorted by distance."""
        env, sight = self._env, self._env.sight
        field = env.field
        foods = list(zip(*np.nonzero(field)))
        out = []
        for p in env.players:
            r, c = p.position
            seen_food = [
                {"dr": int(fr - r), "dc": int(fc - c), "level": int(field[fr, fc])}
                for fr, fc in foods
                if max(abs(fr - r), abs(fc - c)) <= sight
            ]
            mates = [
                {"dr": int(q.position[0] - r), "dc": int(q.position[1] - c), "level": int(q.level)}
                for q in env.players
                if q is not p and max(abs(q.position[0] - r), abs(q.position[1] - c)) <= sight
            ]
            seen_food.sort(key=lambda f: (abs(f["dr"]) + abs(f["dc"]), f["dr"], f["dc"]))
            mates.sort(key=lambda f: (abs(f["dr"]) + abs(f["dc"]), f["dr"], f["dc"]))
            out.append({"level": int(p.level), "foods": seen_food, "agents": mates})
        return out

    def legal_actions(self) -> list[list[int]]:
        """Per agent, lbforaging's valid actions as sorted indices."""
        valid = self._env._valid_actions
        return [sorted(int(a.value) for a in valid[p]) for p in self._env.players]

    def step(self, actions: list[int]) -> tuple[list[float], bool]:
        """Execute one legal action per agent; returns per-agent rewards and whether the episode ended."""
        check_actions(self, actions)
        _, rewards, done, _, _ = self._env.step([int(a) for a in actions])
        return [float(x) for x in rewards], bool(done)

    def won(self) -> bool:
        """True once all food has been collected."""
        return bool(self._env.field.sum() == 0)

    def team_reward(self, rewards: list[float]) -> float:
        """Sum over agents: lbforaging normalises it so a fully foraged episode totals 1.0."""
        return float(sum(rewards))

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue the episode from here (used for short-horizon returns)."""
        env = self._env
        return {
            "field": env.field.tolist(),
            "players": [[int(p.position[0]), int(p.position[1]), int(p.level)] for p in env.players],
            "t": int(env.current_step),
            "food_spawned": float(env._food_spawned),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from `get_state` into this scenario's env (raises if grid or player count differ)."""
        env = self._env
        env.field = np.asarray(state["field"], dtype=np.int32)
        if env.field.shape != tuple(env.field_size) or len(state["players"]) != self.n_agents:
            raise ValueError(
                f"state does not belong to scenario {self.scenario!r} (grid or player count differs)."
            )
        for p, (r, c, lvl) in zip(env.players, state["players"]):
            p.setup((int(r), int(c)), int(lvl), env.field_size)
            p.reward = 0
        env.current_step = int(state["t"])
        env._food_spawned = float(state["food_spawned"])
        env._game_over = False
        env._gen_valid_moves()

    # read-only views used by the scripted policies (centralised: data generation may see everything)
    def positions(self) -> list[tuple[int, int]]:
        """Every agent's (row, column) cell."""
        return [(int(p.position[0]), int(p.position[1])) for p in self._env.players]

    def levels(self) -> list[int]:
        """Every agent's level."""
        return [int(p.level) for p in self._env.players]

    def food_cells(self) -> list[tuple[int, int, int]]:
        """Every food item as (row, column, level)."""
        f = self._env.field
        return [(int(r), int(c), int(f[r, c])) for r, c in zip(*np.nonzero(f))]


# ---------------------------------------------------------------------------------------------- MPE
_MPE_RE = re.compile(r"^spread-(\d+)$")


class MPESpreadEnv:
    """MPE `simple_spread` (N agents cover N landmarks) with discrete actions.

    Observation of agent i: its velocity and the offsets to every landmark and teammate, rounded to 0.1
    (the text resolution). All five actions are always legal, so the legality reward is trivially
    satisfied here; format and agreement rewards still apply. A win is every landmark within 0.1 of an agent
    at the end of the episode (the scenario's own capture radius).
    """

    env_name = "mpe"
    action_names = MPE_ACTIONS
    fallback_action = 0

    def __init__(self, scenario: str, max_cycles: int = 25) -> None:
        m = _MPE_RE.match(scenario)
        if m is None or not 1 <= int(m.group(1)) <= 6:
            raise ValueError(
                f"unknown mpe scenario {scenario!r}: use 'spread-<N>' with 1 <= N <= 6, e.g. 'spread-2'."
            )
        from mpe2 import simple_spread_v3

        self.scenario = scenario
        self.n_agents = int(m.group(1))
        self.max_steps = max_cycles
        self._env = simple_spread_v3.parallel_env(
            N=self.n_agents, max_cycles=max_cycles, continuous_actions=False
        )
        self._names: list[str] = []
        self.t = 0

    def reset(self, seed: int) -> None:
        """Reset to the seeded landmark and agent positions and restart the step count."""
        self._env.reset(seed=int(seed))
        self._names = list(self._env.possible_agents)
        self.t = 0

    @property
    def _world(self):
        return self._env.unwrapped.world

    def observations(self) -> list[dict[str, Any]]:
        """Per agent: its velocity and offsets to every landmark and teammate, rounded to 0.1."""
        w = self._world
        out = []
        for a in w.agents:
            pos = a.state.p_pos
            marks = [_offset(lm.state.p_pos - pos) for lm in w.landmarks]
            mates = [_offset(b.state.p_pos - pos) for b in w.agents if b is not a]
            out.append(
                {"vel": [round(float(v), 1) for v in a.state.p_vel], "landmarks": marks, "agents": mates}
            )
        return out

    def legal_actions(self) -> list[list[int]]:
        """All five actions for every agent: nothing is ever illegal in MPE."""
        return [list(range(len(MPE_ACTIONS))) for _ in range(self.n_agents)]

    def step(self, actions: list[int]) -> tuple[list[float], bool]:
        """Execute one action per agent; the episode ends at `max_steps` or on pettingzoo's termination."""
        check_actions(self, actions)
        _, rew, term, trunc, _ = self._env.step({n: int(a) for n, a in zip(self._names, actions)})
        self.t += 1
        done = self.t >= self.max_steps or any(term.values()) or any(trunc.values())
        return [float(rew[n]) for n in self._names], bool(done)

    def won(self) -> bool:
        """True when every landmark has an agent within 0.1 of it."""
        w = self._world
        return all(
            min(float(np.linalg.norm(a.state.p_pos - lm.state.p_pos)) for a in w.agents) < 0.1
            for lm in w.landmarks
        )

    def team_reward(self, rewards: list[float]) -> float:
        """Mean over agents: each agent's reward already contains the shared coverage term."""
        return float(np.mean(rewards))

    def get_state(self) -> dict[str, Any]:
        """Agent positions and velocities, landmark positions and the step count (JSON-serialisable)."""
        w = self._world
        return {
            "agents": [[*map(float, a.state.p_pos), *map(float, a.state.p_vel)] for a in w.agents],
            "landmarks": [list(map(float, lm.state.p_pos)) for lm in w.landmarks],
            "t": self.t,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        # reset first: pettingzoo drops finished agents, so a used env cannot step again without it
        """Restore a state from `get_state`, resetting first so that a finished env can step again."""
        self.reset(0)
        w = self._world
        if len(state["agents"]) != self.n_agents:
            raise ValueError(f"state does not belong to scenario {self.scenario!r} (agent count differs).")
        for a, row in zip(w.agents, state["agents"]):
            a.state.p_pos = np.array(row[:2])
            a.state.p_vel = np.array(row[2:4])
        for lm, row in zip(w.landmarks, state["landmarks"]):
            lm.state.p_pos = np.array(row)
        self.t = int(state["t"])
        self._env.unwrapped.steps = self.t  # the episode-length counter pettingzoo truncates on

    def positions(self) -> list[np.ndarray]:
        """Every agent's absolute position (copies)."""
        return [a.state.p_pos.copy() for a in self._world.agents]

    def velocities(self) -> list[np.ndarray]:
        """Every agent's velocity (copies)."""
        return [a.state.p_vel.copy() for a in self._world.agents]

    def landmark_positions(self) -> list[np.ndarray]:
        """Every landmark's absolute position (copies)."""
        return [lm.state.p_pos.copy() for lm in self._world.landmarks]


def _offset(d: np.ndarray) -> dict[str, float]:
    return {"dx": round(float(d[0]), 1), "dy": round(float(d[1]), 1)}


def make_env(env_name: str, scenario: str) -> MultiAgentEnv:
    """An adapter for `env_name` (one of `ENV_NAMES`) and one of its scenarios."""
    if env_name == "lbforaging":
        return LBFEnv(scenario)
    if env_name == "mpe":
        return MPESpreadEnv(scenario)
    if env_name == "rware":
        from finetune.dlm.envs_rware import RwareEnv

        return RwareEnv(scenario)
    if env_name == "smax":
        from finetune.dlm.envs_smax import SmaxEnv

        return SmaxEnv(scenario)
    raise ValueError(f"unknown environment {env_name!r}: choose one of {ENV_NAMES}.")
