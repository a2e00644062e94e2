"""Versioned dialogue schema: local observations -> text, actions <-> text, trajectories -> chat samples.

Schema `dlm-dialogue/1` (bump SCHEMA_VERSION on any change to the text below; old datasets then fail loudly):
- system: one line naming the environment and the output format (one action word).
- per agent and step, one exchange: user = the agent's local observation + its legal actions;
  assistant = the action word (e.g. `north`).
- training (centralised) samples may prepend the exchanges of the teammates that act before this
  agent in the same step (observation + action), the DLM "inter-agent context"; execution-time
  prompts (`execution_prompt`) carry the local observation only (decentralised execution).

Offsets are egocentric and written with the action words themselves ("2 north 1 west"), so the text
does not depend on the grid size and the action that closes a gap is named in the observation.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from finetune.dlm.envs import LBF_ACTIONS, MPE_ACTIONS
from finetune.dlm.envs_rware import RWARE_ACTIONS
from finetune.dlm.envs_smax import SMAX_ACTIONS

__all__ = [
    "SCHEMA_VERSION",
    "action_names",
    "check_schema",
    "execution_prompt",
    "parse_action",
    "parse_legal",
    "parse_rware_observation",
    "parse_smax_observation",
    "render_action",
    "render_observation",
    "system_prompt",
    "to_samples",
]

SCHEMA_VERSION = "dlm-dialogue/1"

_ACTIONS = {"lbforaging": LBF_ACTIONS, "mpe": MPE_ACTIONS, "rware": RWARE_ACTIONS, "smax": SMAX_ACTIONS}
# Short on purpose: the system turn is in every prompt and its tokens dominate CPU prefill time.
_DESCRIPTIONS = {
    "lbforaging": "a foraging agent",
    "mpe": "a spread agent",
    "rware": "a warehouse robot",
    "smax": "a combat unit",
}


def action_names(env_name: str) -> tuple[str, ...]:
    """The action vocabulary of `env_name`, in the environment's integer order."""
    if env_name not in _ACTIONS:
        raise ValueError(f"unknown environment {env_name!r}: choose one of {sorted(_ACTIONS)}.")
    return _ACTIONS[env_name]


def system_prompt(env_name: str) -> str:
    """The system prompt of environment `env_name` (an unknown name raises)."""
    action_names(env_name)  # validates the name
    return f"You are {_DESCRIPTIONS[env_name]}. Reply with one legal action."


def render_action(env_name: str, action: int) -> str:
    """Action index -> its word; raises on an index outside the vocabulary."""
    names = action_names(env_name)
    if not 0 <= int(action) < len(names):
        raise ValueError(f"action {action} is outside {env_name}'s {len(names)} actions {names}.")
    return names[int(action)]


def parse_action(env_name: str, text: Any) -> int | None:
    """Completion text -> action index, or None when it is not exactly one action word.

    Tolerates surrounding whitespace, case and one trailing period; anything else (extra words,
    several actions, non-strings) is unparseable, so the format reward and fallback accounting see it.
    """
    if not isinstance(text, str):
        return None
    word = text.strip().lower()
    if word.endswith("."):
        word = word[:-1].rstrip()
    names = action_names(env_name)
    return names.index(word) if word in names else None


def _lbf_offset(dr: int, dc: int) -> str:
    parts = []
    if dr:
        parts.append(f"{abs(dr)} {'south' if dr > 0 else 'north'}")
    if dc:
        parts.append(f"{abs(dc)} {'east' if dc > 0 else 'west'}")
    return " ".join(parts) or "here"


def _mpe_offset(o: dict[str, float]) -> str:
    return f"x {o['dx']:+.1f} y {o['dy']:+.1f}"


def _rware_text(obs: dict[str, Any]) -> str:
    if obs["carrying"]:
        load = "carrying a requested shelf" if obs["carrying_requested"] else "carrying a delivered shelf"
    else:
        load = "under a shelf" if obs["under_shelf"] else "empty"
    spots = {
        k: "; ".join(_lbf_offset(o["dr"], o["dc"]) for o in obs[k]) or "none seen"
        for k in obs
        if k in _RWARE_LISTS
    }
    return (
        f"you: facing {obs['heading']}, {load}\nrequested: {spots['requested']}\ngoals: {spots['goals']}\n"
        f"agents: {spots['agents']}"
    )


_RWARE_LISTS = ("requested", "goals", "agents")


def _parse_offset(text: str) -> dict[str, int]:
    dr = dc = 0
    words = text.split()
    for n, word in zip(words[::2], words[1::2]):
        k = int(n)
        dr, dc = (dr + k, dc) if word == "south" else (dr - k, dc) if word == "north" else (dr, dc)
        dc = dc + k if word == "east" else dc - k if word == "west" else dc
    return {"dr": dr, "dc": dc}


def parse_rware_observation(text: str) -> dict[str, Any]:
    """The inverse of `render_observation` for rware (used to check that the text loses nothing)."""
    lines = dict(line.split(": ", 1) for line in str(text).splitlines() if ": " in line)
    heading, _, load = lines["you"].removeprefix("facing ").partition(", ")
    obs: dict[str, Any] = {
        "heading": heading,
        "carrying": load.startswith("carrying"),
        "carrying_requested": load == "carrying a requested shelf",
        "under_shelf": load == "under a shelf",
    }
    for key in _RWARE_LISTS:
        val = lines[key]
        obs[key] = [] if val == "none seen" else [_parse_offset(p) for p in val.split("; ")]
    return obs


def _smax_unit(u: dict[str, Any]) -> str:
    return f"{u['id']} {u['type']} {u['health']}% at x {u['dx']:+.1f} y {u['dy']:+.1f}"


def _smax_text(obs: dict[str, Any]) -> str:
    enemies = "; ".join(_smax_unit(u) for u in obs["enemies"]) or "none seen"
    allies = "; ".join(_smax_unit(u) for u in obs["allies"]) or "none seen"
    return f"you: {obs['type']} {obs['health']}%\nenemies: {enemies}\nallies: {allies}"


_SMAX_UNIT = re.compile(r"^(\d+) (\w+) (\d+)% at x ([+-]\d+\.\d) y ([+-]\d+\.\d)$")


def parse_smax_observation(text: str) -> dict[str, Any]:
    """The inverse of `render_observation` for smax (used to check that the text loses nothing)."""
    lines = dict(line.split(": ", 1) for line in str(text).splitlines() if ": " in line)
    kind, health = lines["you"].split(" ")
    obs: dict[str, Any] = {"type": kind, "health": int(health.rstrip("%"))}
    for key in ("enemies", "allies"):
        units = []
        if lines[key] != "none seen":
            for part in lines[key].split("; "):
                m = _SMAX_UNIT.match(part)
                if m is None:
                    raise ValueError(f"unparseable smax unit {part!r}")
                units.append(
                    {"id": int(m[1]), "type": m[2], "health": int(m[3]), "dx": float(m[4]), "dy": float(m[5])}
                )
        obs[key] = units
    return obs


def render_observation(env_name: str, obs: dict[str, Any], legal: list[int]) -> str:
    """One agent's local observation and legal actions as the user turn."""
    names = action_names(env_name)
    legal_txt = "legal: " + ", ".join(names[a] for a in legal)
    if env_name == "lbforaging":
        foods = (
            "; ".join(f"level {f['level']} at {_lbf_offset(f['dr'], f['dc'])}" for f in obs["foods"])
            or "none seen"
        )
        mates = (
            "; ".join(f"level {m['level']} at {_lbf_offset(m['dr'], m['dc'])}" for m in obs["agents"])
            or "none seen"
        )
        return f"you: level {obs['level']}\nfood: {foods}\nagents: {mates}\n{legal_txt}"
    if env_name == "rware":
        return _rware_text(obs) + f"\n{legal_txt}"
    if env_name == "smax":
        return _smax_text(obs) + f"\n{legal_txt}"
    marks = "; ".join(_mpe_offset(o) for o in obs["landmarks"]) or "none"
    mates = "; ".join(_mpe_offset(o) for o in obs["agents"]) or "none"
    vx, vy = obs["vel"]
    return f"you: velocity x {vx:+.1f} y {vy:+.1f}\nlandmarks: {marks}\nagents: {mates}\n{legal_txt}"


def parse_legal(env_name: str, user_text: str) -> list[int]:
    """The legal action indices listed in a user turn (the inverse of the `legal:` line)."""
    names = action_names(env_name)
    for line in str(user_text).splitlines()[::-1]:
        if line.startswith("legal: "):
            return sorted(
                names.index(w.strip()) for w in line[len("legal: ") :].split(",") if w.strip() in names
            )
    return []


def execution_prompt(env_name: str, obs: dict[str, Any], legal: list[int]) -> list[dict[str, str]]:
    """Decentralised execution: system + this agent's local observation only."""
    return [
        {"role": "system", "content": system_prompt(env_name)},
        {"role": "user", "content": render_observation(env_name, obs, legal)},
    ]


def check_schema(rows_or_version: Any, expected: str = SCHEMA_VERSION) -> None:
    """Raise a clear error when a dataset was written under another schema version."""
    version = rows_or_version if isinstance(rows_or_version, str) else None
    if version is None:
        cols = getattr(rows_or_version, "column_names", None) or []
        if "schema_version" not in cols:
            raise ValueError(f"dataset has no `schema_version` column; expected {expected!r}. Regenerate it.")
        found = set(rows_or_version["schema_version"])
        version = found.pop() if len(found) == 1 else f"mixed {sorted(found)}"
    if version != expected:
        raise ValueError(
            f"dataset schema {version!r} does not match this code's {expected!r}; regenerate it with "
            "`latentworks dlm data` (or check out the code version that wrote it)."
        )


def to_samples(
    step_rows: list[dict[str, Any]], teammate_prob: float = 0.5, seed: int = 0
) -> list[dict[str, Any]]:
    """Trajectory step rows (see `finetune.dlm.data`) -> one prompt/completion sample per agent and step.

    With probability `teammate_prob` a sample carries the exchanges of teammates 0..i-1 of the same
    step before agent i's turn (centralised training context); otherwise it equals the execution prompt.
    """
    if not 0.0 <= teammate_prob <= 1.0:
        raise ValueError(f"`teammate_prob` must be in [0, 1], got {teammate_prob}.")
    rng = random.Random(seed)
    out = []
    for row in step_rows:
        env_name = row["env"]
        obs = [json.loads(o) for o in row["obs"]]
        turns = [render_observation(env_name, o, lg) for o, lg in zip(obs, row["legal"])]
        for i, action in enumerate(row["actions"]):
            prompt = [{"role": "system", "content": system_prompt(env_name)}]
            if i > 0 and rng.random() < teammate_prob:
                for j in range(i):
                    prompt.append({"role": "user", "content": f"teammate {j}\n{turns[j]}"})
                    prompt.append(
                        {"role": "assistant", "content": render_action(env_name, row["actions"][j])}
                    )
            prompt.append({"role": "user", "content": turns[i]})
            out.append(
                {
                    "prompt": prompt,
                    "completion": [{"role": "assistant", "content": render_action(env_name, action)}],
                    "env": env_name,
                    "scenario": row["scenario"],
                    "agent": i,
                    "legal": list(row["legal"][i]),
                    "action": int(action),
                    "joint_actions": list(row["actions"]),
                    "state": row["state"],
                    "obs": row["obs"][i],
                    "tier": row["tier"],
                    "schema_version": SCHEMA_VERSION,
                }
            )
    return out
