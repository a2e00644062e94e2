"""Multi-Robot Warehouse (`rware` 2.0) behind the DLM adapter interface, plus its scripted expert.

Scenarios: `<size>-<N>ag[-easy|-hard]` as in rware's registered ids (`tiny-2ag`, `small-4ag-hard`);
sizes tiny/small/medium/large, request queue N (easy 2N, hard N/2), global team reward (one per delivered
requested shelf), 100 steps per episode. A win is at least one delivery.

Observation of agent i (local, egocentric offsets in rows/columns like LBF, `dr` > 0 = south): its heading,
whether it carries a shelf and whether that shelf is requested, whether it stands under a shelf, the
requested shelves and goals within `sight` cells, and teammates within `sight`. Legal actions: `noop`,
`left`, `right` always; `forward` unless it would leave the grid or push a carried shelf into a standing
one; `toggle` (load/unload) only under a shelf when empty-handed, or off the highway when carrying.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import numpy as np

from finetune.dlm.env_api import check_actions

__all__ = ["RWARE_ACTIONS", "RwareEnv", "rware_expert"]

RWARE_ACTIONS = ("noop", "forward", "left", "right", "toggle")
HEADINGS = ("north", "south", "west", "east")  # rware Direction UP, DOWN, LEFT, RIGHT
_STEP = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}  # heading -> (dr, dc)
_CLOCKWISE = (0, 3, 1, 2)  # north, east, south, west as heading indices
_SIZES = {"tiny": (1, 3), "small": (2, 3), "medium": (2, 5), "large": (3, 5)}
_DIFFICULTY = {"-easy": 2.0, "": 1.0, "-hard": 0.5}
_RE = re.compile(r"^(tiny|small|medium|large)-(\d+)ag(-easy|-hard)?$")


class RwareEnv:
    """RWARE with strict legality and text-friendly local observations (see the module docstring)."""

    env_name = "rware"
    action_names = RWARE_ACTIONS
    fallback_action = 0  # noop is always legal

    def __init__(self, scenario: str, max_steps: int = 100, sight: int = 5) -> None:
        m = _RE.match(scenario)
        if m is None or not 1 <= int(m.group(2)) <= 19:
            raise ValueError(
                f"unknown rware scenario {scenario!r}: use '<tiny|small|medium|large>-<N>ag[-easy|-hard]' "
                "with 1 <= N <= 19, e.g. 'tiny-2ag'."
            )
        from rware.warehouse import RewardType, Warehouse

        rows, cols = _SIZES[m.group(1)]
        n = int(m.group(2))
        self.scenario, self.n_agents, self.max_steps, self.sight = scenario, n, max_steps, sight
        self._env = Warehouse(
            shelf_columns=cols,
            column_height=8,
            shelf_rows=rows,
            n_agents=n,
            msg_bits=0,
            sensor_range=1,
            request_queue_size=max(1, int(n * _DIFFICULTY[m.group(3) or ""])),
            max_inactivity_steps=None,
            max_steps=max_steps,
            reward_type=RewardType.GLOBAL,
        )
        self.deliveries = 0

    def reset(self, seed: int) -> None:
        """Reset to the seeded warehouse layout and zero the delivery count."""
        self._env.reset(seed=int(seed))
        self.deliveries = 0

    # ------------------------------------------------------------------ views of the warehouse
    def _shelf_at(self, r: int, c: int) -> int:
        return int(self._env.grid[1, r, c])  # shelf layer: id or 0

    def _requested(self) -> set[int]:
        return {s.id for s in self._env.request_queue}

    def _cells(self) -> dict[str, list[tuple[int, int]]]:
        env = self._env
        req = self._requested()
        carried = {a.carrying_shelf.id for a in env.agents if a.carrying_shelf}
        return {
            "requested": [(s.y, s.x) for s in env.shelfs if s.id in req and s.id not in carried],
            "goals": [(y, x) for x, y in env.goals],
        }

    def observations(self) -> list[dict[str, Any]]:
        """Per agent: heading, carrying flags, and the nearest requested shelves, goals and teammates in sight."""
        env, cells = self._env, self._cells()
        req = self._requested()
        out = []
        for a in env.agents:
            r, c = a.y, a.x

            def near(points, r=r, c=c):
                seen = [
                    {"dr": int(pr - r), "dc": int(pc - c)}
                    for pr, pc in points
                    if max(abs(pr - r), abs(pc - c)) <= self.sight
                ]
                return sorted(seen, key=lambda o: (abs(o["dr"]) + abs(o["dc"]), o["dr"], o["dc"]))[:4]

            mates = [(b.y, b.x) for b in env.agents if b is not a]
            out.append(
                {
                    "heading": HEADINGS[a.dir.value],
                    "carrying": a.carrying_shelf is not None,
                    "carrying_requested": bool(a.carrying_shelf and a.carrying_shelf.id in req),
                    "under_shelf": a.carrying_shelf is None and self._shelf_at(r, c) > 0,
                    "requested": near(cells["requested"]),
                    "goals": near(cells["goals"]),
                    "agents": near(mates),
                }
            )
        return out

    def _forward_ok(self, a) -> bool:
        dr, dc = _STEP[a.dir.value]
        r, c = a.y + dr, a.x + dc
        h, w = self._env.grid_size
        if not (0 <= r < h and 0 <= c < w):
            return False
        return not (a.carrying_shelf is not None and self._shelf_at(r, c) > 0)

    def legal_actions(self) -> list[list[int]]:
        """Per agent: noop/left/right always, forward and toggle only where rware would carry them out."""
        env, out = self._env, []
        for a in env.agents:
            legal = [0, 2, 3]
            if self._forward_ok(a):
                legal.append(1)
            if (a.carrying_shelf is None and self._shelf_at(a.y, a.x)) or (
                a.carrying_shelf is not None and not env._is_highway(a.x, a.y)
            ):
                legal.append(4)
            out.append(sorted(legal))
        return out

    def step(self, actions: list[int]) -> tuple[list[float], bool]:
        """Execute one legal action per agent and count deliveries; returns per-agent rewards and done."""
        check_actions(self, actions)
        _, rewards, done, _, _ = self._env.step([int(a) for a in actions])
        team = float(rewards[0]) if rewards else 0.0  # global reward: every agent gets each delivery
        self.deliveries += int(round(team))
        return [float(x) for x in rewards], bool(done)

    def won(self) -> bool:
        """True once at least one requested shelf has been delivered this episode."""
        return self.deliveries > 0

    def team_reward(self, rewards: list[float]) -> float:
        """Deliveries this step (the global reward is shared, so one agent's value counts them)."""
        return float(rewards[0]) if rewards else 0.0

    def get_state(self) -> dict[str, Any]:
        """Shelf and agent positions, headings, carried shelves, the request queue and the step count."""
        env = self._env
        return {
            "shelves": [[int(s.id), int(s.y), int(s.x)] for s in env.shelfs],
            "agents": [
                [int(a.y), int(a.x), int(a.dir.value), int(a.carrying_shelf.id) if a.carrying_shelf else 0]
                for a in env.agents
            ],
            "requests": [int(s.id) for s in env.request_queue],
            "t": int(env._cur_steps),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from `get_state` (raises if agent or shelf count differ from this scenario)."""
        from rware.warehouse import Direction

        env = self._env
        if len(state["agents"]) != self.n_agents or len(state["shelves"]) != len(env.shelfs):
            raise ValueError(f"state does not belong to scenario {self.scenario!r}.")
        by_id = {s.id: s for s in env.shelfs}
        for sid, r, c in state["shelves"]:
            by_id[sid].y, by_id[sid].x = int(r), int(c)
        for a, (r, c, d, carried) in zip(env.agents, state["agents"]):
            a.y, a.x, a.dir = int(r), int(c), Direction(int(d))
            a.carrying_shelf = by_id[carried] if carried else None
        env.request_queue = [by_id[i] for i in state["requests"]]
        env._cur_steps = int(state["t"])
        env._recalc_grid()

    # ------------------------------------------------------------------ centralised views (expert)
    def agent_states(self) -> list[tuple[int, int, int, int | None]]:
        """Every agent's (row, column, heading, carried shelf id or None), for the centralised expert."""
        return [
            (a.y, a.x, a.dir.value, a.carrying_shelf.id if a.carrying_shelf else None)
            for a in self._env.agents
        ]


def _bfs_first_step(env: RwareEnv, start: tuple[int, int], goals: set[tuple[int, int]], carrying: bool):
    """First cell on a shortest path from `start` to any of `goals` (carried shelves cannot pass shelves)."""
    h, w = env._env.grid_size
    prev = {start: None}
    q = deque([start])
    while q:
        cur = q.popleft()
        if cur in goals:
            while prev[cur] is not None and prev[cur] != start:
                cur = prev[cur]
            return cur
        for dr, dc in _STEP.values():
            nr, nc = cur[0] + dr, cur[1] + dc
            if not (0 <= nr < h and 0 <= nc < w) or (nr, nc) in prev:
                continue
            if carrying and env._shelf_at(nr, nc) and (nr, nc) not in goals:
                continue
            prev[(nr, nc)] = cur
            q.append((nr, nc))
    return None


def _move_towards(heading: int, here: tuple[int, int], nxt: tuple[int, int]) -> int:
    want = next(h for h, (dr, dc) in _STEP.items() if (here[0] + dr, here[1] + dc) == nxt)
    if want == heading:
        return 1  # forward
    turn = (_CLOCKWISE.index(want) - _CLOCKWISE.index(heading)) % 4
    return 3 if turn in (1, 2) else 2  # right for a clockwise quarter (or a half) turn, else left


def rware_expert(env: RwareEnv, rng: np.random.Generator) -> list[int]:
    """Fetch the nearest unclaimed requested shelf, carry it to a goal, return it to an empty shelf cell."""
    req = env._requested()
    cells = env._cells()
    claimed: set[tuple[int, int]] = set()
    legal = env.legal_actions()
    acts = []
    for i, (r, c, heading, carried) in enumerate(env.agent_states()):
        here = (r, c)
        if carried is None:
            targets = {p for p in cells["requested"] if p not in claimed}
            if here in targets:
                acts.append(4 if 4 in legal[i] else 0)
                claimed.add(here)
                continue
        elif carried in req:
            targets = set(cells["goals"])
        else:  # delivered: put the shelf down on a free shelf cell
            if 4 in legal[i]:
                acts.append(4)
                continue
            h, w = env._env.grid_size
            targets = {
                (y, x)
                for y in range(h)
                for x in range(w)
                if not env._env._is_highway(x, y) and not env._shelf_at(y, x)
            }
        nxt = _bfs_first_step(env, here, targets, carried is not None) if targets else None
        if nxt is None or nxt == here:
            acts.append(int(rng.choice(legal[i])))
            continue
        if carried is None:
            claimed.add(min(targets, key=lambda p: abs(p[0] - r) + abs(p[1] - c)))
        a = _move_towards(heading, here, nxt)
        acts.append(a if a in legal[i] else 0)
    return acts
