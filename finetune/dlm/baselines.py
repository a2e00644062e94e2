"""Baselines on the same offline data: behaviour cloning (one MLP per agent), independent CQL, scripted expert.

Both learned baselines read a fixed-size vector built from the same local observation the LM sees
(nearest foods/landmarks and teammates as offsets, plus the legal-action mask) and pick the best
*legal* action, as offline MARL methods do with `avail_actions`. The prompted-LM baseline is
`evaluate.LMPolicy` on the un-finetuned base model.

Independent CQL (Kumar et al. 2020, discrete form): each agent learns Q(o_i, a_i) from the shared team
reward with a parameter-shared network, loss = TD error + alpha * (logsumexp over legal a of Q(o, a)
- Q(o, a_data)).
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from finetune.dlm.dialogue import action_names
from finetune.dlm.policies import expert_actions

__all__ = [
    "BCPolicy",
    "CQLPolicy",
    "ExpertPolicy",
    "features",
    "load_policy",
    "save_policy",
    "train_bc",
    "train_cql",
]

logger = logging.getLogger(__name__)

K_ITEMS, K_MATES = 4, 5  # nearest foods/landmarks and teammates encoded; more are dropped


def features(env_name: str, obs: dict[str, Any], legal: list[int]) -> list[float]:
    """Fixed-size vector of one agent's local observation (size independent of grid and team size)."""
    n_act = len(action_names(env_name))
    mask = np.zeros(n_act, dtype=np.float32)
    mask[list(legal)] = 1.0
    if env_name == "lbforaging":
        head = [obs["level"] / 3.0]
        items = [(f["dr"] / 10, f["dc"] / 10, f["level"] / 3.0) for f in obs["foods"]]
        mates = [(m["dr"] / 10, m["dc"] / 10, m["level"] / 3.0) for m in obs["agents"]]
    elif env_name == "rware":
        head = [float(obs["heading"] == h) for h in ("north", "south", "west", "east")]
        head += [float(obs["carrying"]), float(obs["carrying_requested"]), float(obs["under_shelf"])]
        goals = obs["carrying"] and obs["carrying_requested"]
        items = [(o["dr"] / 10, o["dc"] / 10, 1.0) for o in (obs["goals"] if goals else obs["requested"])]
        mates = [(o["dr"] / 10, o["dc"] / 10, 0.0) for o in obs["agents"]]
    elif env_name == "smax":
        head = [obs["health"] / 100.0]
        items = [(u["dx"] / 10, u["dy"] / 10, u["health"] / 100.0) for u in obs["enemies"]]
        mates = [(u["dx"] / 10, u["dy"] / 10, u["health"] / 100.0) for u in obs["allies"]]
    else:
        head = list(obs["vel"])
        items = [(o["dx"], o["dy"], 0.0) for o in obs["landmarks"]]
        mates = [(o["dx"], o["dy"], 0.0) for o in obs["agents"]]

    def block(rows: list[tuple[float, float, float]], k: int) -> list[float]:
        out: list[float] = []
        for j in range(k):
            out += [*rows[j], 1.0] if j < len(rows) else [0.0, 0.0, 0.0, 0.0]
        return out

    return head + block(items, K_ITEMS) + block(mates, K_MATES) + mask.tolist()


def mlp(d_in: int, d_out: int, *, hidden: int) -> nn.Module:
    """The two-hidden-layer ReLU network every learned baseline uses (BC, CQL, the QMIX agents)."""
    return nn.Sequential(
        nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, d_out)
    )


def _masked(logits: torch.Tensor, legal_mask: torch.Tensor) -> torch.Tensor:
    return logits.masked_fill(legal_mask < 0.5, float("-inf"))


def _arrays(env_name: str, rows) -> dict[str, Any]:
    """Per-agent transitions (x, a, r_team, x_next, done) from step rows ordered by episode and time."""
    n_act = len(action_names(env_name))
    xs, acts, agent, rew, done, nxt = [], [], [], [], [], []
    prev: dict[tuple, list[int]] = {}
    for row in rows:
        key = (row["scenario"], row["tier"], row["episode"])
        feats = [features(env_name, json.loads(o), lg) for o, lg in zip(row["obs"], row["legal"])]
        if key in prev:  # link the previous step of this episode to this one
            for i, idx in enumerate(prev[key]):
                nxt[idx] = len(xs) + i
        ids = []
        for i, (f, a) in enumerate(zip(feats, row["actions"])):
            ids.append(len(xs))
            xs.append(f)
            acts.append(a)
            agent.append(i)
            rew.append(row["team_reward"])
            done.append(float(row["done"]))
            nxt.append(-1)
        prev[key] = ids
    x = torch.tensor(np.array(xs, dtype=np.float32))
    return {
        "x": x,
        "a": torch.tensor(acts),
        "agent": torch.tensor(agent),
        "r": torch.tensor(rew, dtype=torch.float32),
        "done": torch.tensor(done),
        "next": torch.tensor(nxt),
        "mask": x[:, -n_act:],
    }


class BCPolicy:
    """Behaviour cloning with one MLP per agent index (agents beyond the trained count reuse index mod n)."""

    def __init__(self, env_name: str, nets: list[nn.Module], name: str = "BC (MLP per agent)") -> None:
        self.env_name, self.nets, self.name = env_name, nets, name

    @torch.no_grad()
    def act(self, env_name: str, batch: list[tuple[dict[str, Any], list[int], int]]) -> list[int]:
        """The argmax legal action of each agent's own network (index mod the trained count)."""
        out = []
        for o, lg, agent in batch:
            x = torch.tensor([features(env_name, o, lg)])
            net = self.nets[agent % len(self.nets)]
            out.append(int(_masked(net(x), x[:, -len(action_names(env_name)) :]).argmax(-1)))
        return out


def train_bc(env_name: str, rows, epochs: int = 30, hidden: int = 64, seed: int = 0) -> BCPolicy:
    """Cross-entropy over legal actions, one network per agent index."""
    torch.manual_seed(seed)
    d = _arrays(env_name, rows)
    n_agents = int(d["agent"].max()) + 1
    n_act = len(action_names(env_name))
    nets = []
    for i in range(n_agents):
        sel = d["agent"] == i
        x, a, m = d["x"][sel], d["a"][sel], d["mask"][sel]
        net = mlp(x.shape[1], n_act, hidden=hidden)
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        for _ in range(epochs):
            for idx in torch.randperm(len(x)).split(256):
                loss = nn.functional.cross_entropy(_masked(net(x[idx]), m[idx]), a[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        logger.info("BC agent %d: final loss %.3f on %d samples", i, loss.item(), len(x))
        nets.append(net.eval())
    return BCPolicy(env_name, nets)


class CQLPolicy:
    """Greedy legal action of a (parameter-shared) conservative Q-network."""

    def __init__(self, env_name: str, net: nn.Module, name: str = "Independent CQL") -> None:
        self.env_name, self.net, self.name = env_name, net, name

    @torch.no_grad()
    def act(self, env_name: str, batch: list[tuple[dict[str, Any], list[int], int]]) -> list[int]:
        """The greedy legal action of the shared Q-network for each item of the batch."""
        x = torch.tensor([features(env_name, o, lg) for o, lg, _ in batch])
        q = _masked(self.net(x), x[:, -len(action_names(env_name)) :])
        return [int(v) for v in q.argmax(-1)]


def train_cql(
    env_name: str,
    rows,
    steps: int = 3000,
    alpha: float = 1.0,
    gamma: float = 0.95,
    hidden: int = 64,
    seed: int = 0,
) -> CQLPolicy:
    """Discrete CQL on per-agent transitions with the team reward and a hard-updated target network."""
    if alpha < 0 or not 0 <= gamma < 1:
        raise ValueError(f"need `alpha` >= 0 and 0 <= `gamma` < 1, got alpha={alpha}, gamma={gamma}.")
    torch.manual_seed(seed)
    d = _arrays(env_name, rows)
    n_act = len(action_names(env_name))
    net = mlp(d["x"].shape[1], n_act, hidden=hidden)
    target = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    has_next = d["next"] >= 0
    nxt = d["next"].clamp_min(0)
    for step in range(steps):
        idx = torch.randint(0, len(d["x"]), (256,))
        q = net(d["x"][idx])  # (N, A)
        q_data = q.gather(1, d["a"][idx, None]).squeeze(1)
        with torch.no_grad():
            q_next = _masked(target(d["x"][nxt[idx]]), d["mask"][nxt[idx]]).max(-1).values
            q_next = torch.where(has_next[idx] & (d["done"][idx] < 0.5), q_next, torch.zeros_like(q_next))
            y = d["r"][idx] + gamma * q_next
        td = nn.functional.mse_loss(q_data, y)
        conservative = (torch.logsumexp(_masked(q, d["mask"][idx]), -1) - q_data).mean()
        loss = td + alpha * conservative
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 200 == 0:
            target.load_state_dict(net.state_dict())
    logger.info("CQL: final td %.4f, conservative gap %.3f", td.item(), conservative.item())
    return CQLPolicy(env_name, net.eval())


class ExpertPolicy:
    """The centralised scripted expert (the data's 'good' tier without noise): a reference, not a baseline."""

    central = True
    name = "Scripted expert (centralised, reference)"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def joint(self, env) -> list[int]:
        """The expert's joint action, read from the full environment state."""
        return expert_actions(env, self.rng)

    def act(self, env_name: str, batch) -> list[int]:
        """Always raises: the expert acts on the environment state, not on local observations."""
        raise ValueError(
            "the scripted expert needs the environment state; `run_episodes` calls `joint(env)`."
        )


def save_policy(policy: BCPolicy | CQLPolicy, path: str | Path) -> None:
    """Save the whole policy object (small MLPs) with torch.save."""
    torch.save(policy, str(path))


def load_policy(path: str | Path) -> BCPolicy | CQLPolicy:
    """A BC or CQL policy saved by `save_policy`."""
    return torch.load(str(path), weights_only=False)
