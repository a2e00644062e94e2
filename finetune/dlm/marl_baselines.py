"""Offline MARL baselines with value decomposition: QMIX + CQL (joint, sampled) and CFCQL (counterfactual).

Both learn a parameter-shared agent network Q_i(o_i, a_i) over the same local-observation features as BC
and independent CQL, mixed by a QMIX hypernetwork (Rashid et al. 2018) conditioned on the global state
(here the stacked agent features, padded to the largest team in the data). Execution is decentralised:
each agent takes the greedy legal action of its own Q_i, so the policy runs on unseen team sizes.

Conservative terms (the difference between the two methods):
- `qmix_cql` (MACQL in Shao et al. 2023): logsumexp of Q_tot over `n_ood` uniformly sampled legal
  joint actions and the data action, minus Q_tot of the data action.
- `cfcql` (Counterfactual CQL, Shao et al. NeurIPS 2023): for each agent i, logsumexp over its own legal
  actions of Q_tot(s, a_i, a_-i from the data) minus Q_tot(s, a_data), averaged over agents with equal
  weights lambda_i = 1/n (the paper also offers a data-dependent softmax weighting, not used here).
  Only one agent deviates at a time, so the penalty does not grow with the joint action space.

TD targets use a hard-updated target agent network and mixer with double-Q action selection.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from finetune.dlm.baselines import CQLPolicy, features, mlp
from finetune.dlm.dialogue import action_names

__all__ = ["JointData", "QMixer", "joint_arrays", "train_mixer_cql"]

logger = logging.getLogger(__name__)

NEG = -1e9  # masked logit for illegal actions (finite, so sums over padded agents stay finite)


@dataclass
class JointData:
    """One row per time step: x (T, n, d) agent features, a (T, n), legal (T, n, A), agent valid (T, n),
    team reward r (T,), done (T,), next (T,) index of the next step of the episode or -1."""

    x: torch.Tensor
    a: torch.Tensor
    legal: torch.Tensor
    valid: torch.Tensor
    r: torch.Tensor
    done: torch.Tensor
    next: torch.Tensor


def joint_arrays(env_name: str, rows) -> JointData:
    """Joint transitions from trajectory step rows (ordered by episode and time), padded to the largest team."""
    rows = list(rows)
    n_act = len(action_names(env_name))
    n_max = max(len(r["actions"]) for r in rows)
    feats, acts, legal, valid, rew, done, nxt = [], [], [], [], [], [], []
    prev: dict[tuple, int] = {}
    d = None
    for k, row in enumerate(rows):
        key = (row["scenario"], row["tier"], row["episode"])
        if key in prev:
            nxt[prev[key]] = k
        prev[key] = k
        f = [features(env_name, json.loads(o), lg) for o, lg in zip(row["obs"], row["legal"])]
        d = len(f[0])
        pad = n_max - len(f)
        feats.append(f + [[0.0] * d] * pad)
        acts.append(list(row["actions"]) + [0] * pad)
        m = np.zeros((n_max, n_act), dtype=np.float32)
        for i, lg in enumerate(row["legal"]):
            m[i, list(lg)] = 1.0
        m[len(f) :, 0] = 1.0  # padded agents: one dummy legal action, masked out of Q_tot below
        legal.append(m)
        valid.append([1.0] * len(f) + [0.0] * pad)
        rew.append(float(row["team_reward"]))
        done.append(float(row["done"]))
        nxt.append(-1)
    return JointData(
        x=torch.tensor(np.array(feats, dtype=np.float32)),
        a=torch.tensor(acts),
        legal=torch.tensor(np.array(legal)),
        valid=torch.tensor(valid),
        r=torch.tensor(rew),
        done=torch.tensor(done),
        next=torch.tensor(nxt),
    )


class QMixer(nn.Module):
    """Monotonic mixing of agent values: Q_tot = w2(s)^T elu(W1(s)^T q + b1(s)) + V(s), with |W| >= 0."""

    def __init__(self, n_agents: int, state_dim: int, embed: int = 32) -> None:
        super().__init__()
        self.n, self.embed = n_agents, embed
        self.w1 = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, n_agents * embed))
        self.b1 = nn.Linear(state_dim, embed)
        self.w2 = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, embed))
        self.v = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """q (..., n) chosen agent values, s (..., state_dim) -> Q_tot (...)."""
        lead = q.shape[:-1]
        q, s = q.reshape(-1, 1, self.n), s.reshape(-1, s.shape[-1])
        w1 = self.w1(s).abs().view(-1, self.n, self.embed)
        hidden = nn.functional.elu(torch.bmm(q, w1) + self.b1(s).unsqueeze(1))  # (B, 1, embed)
        w2 = self.w2(s).abs().view(-1, self.embed, 1)
        return (torch.bmm(hidden, w2).squeeze(-1) + self.v(s)).view(lead)


def _chosen(q_all: torch.Tensor, a: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, n, A), (B, ..., n) actions -> (B, ..., n) agent values, zero for padded agents."""
    if a.dim() == 2:
        return q_all.gather(-1, a.unsqueeze(-1)).squeeze(-1) * valid
    qa = q_all.unsqueeze(1).expand(-1, a.shape[1], -1, -1)
    return qa.gather(-1, a.unsqueeze(-1)).squeeze(-1) * valid.unsqueeze(1)


def train_mixer_cql(
    env_name: str,
    data: JointData,
    method: str = "cfcql",
    steps: int = 2000,
    alpha: float = 1.0,
    gamma: float = 0.95,
    hidden: int = 64,
    n_ood: int = 10,
    batch: int = 128,
    seed: int = 0,
) -> CQLPolicy:
    """Train QMIX + `method` ('qmix_cql' or 'cfcql') on `data`; return the decentralised greedy policy."""
    if method not in ("qmix_cql", "cfcql"):
        raise ValueError(f"`method` must be 'qmix_cql' or 'cfcql', got {method!r}.")
    if alpha < 0 or not 0 <= gamma < 1:
        raise ValueError(f"need `alpha` >= 0 and 0 <= `gamma` < 1, got alpha={alpha}, gamma={gamma}.")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    T, n, d = data.x.shape
    n_act = data.legal.shape[-1]
    agent = mlp(d, n_act, hidden=hidden)
    mixer = QMixer(n, n * d)
    t_agent, t_mixer = copy.deepcopy(agent), copy.deepcopy(mixer)
    opt = torch.optim.Adam([*agent.parameters(), *mixer.parameters()], lr=5e-4)
    has_next = data.next >= 0
    nxt = data.next.clamp_min(0)
    for step in range(steps):
        idx = torch.randint(0, T, (batch,), generator=gen)
        x, a, lg, val = data.x[idx], data.a[idx], data.legal[idx], data.valid[idx]
        s = x.reshape(batch, -1)
        q_all = agent(x).masked_fill(lg < 0.5, NEG)  # (B, n, A)
        q_data = mixer(_chosen(q_all, a, val), s)  # (B,)
        with torch.no_grad():
            xn, lgn, valn = data.x[nxt[idx]], data.legal[nxt[idx]], data.valid[nxt[idx]]
            greedy = agent(xn).masked_fill(lgn < 0.5, NEG).argmax(-1)  # double Q: online picks
            q_next = t_mixer(_chosen(t_agent(xn), greedy, valn), xn.reshape(batch, -1))
            cont = (has_next[idx] & (data.done[idx] < 0.5)).float()
            y = data.r[idx] + gamma * cont * q_next
        td = nn.functional.mse_loss(q_data, y)
        if method == "qmix_cql":
            probs = lg / lg.sum(-1, keepdim=True)  # uniform over each agent's legal actions
            ood = torch.multinomial(probs.reshape(-1, n_act), n_ood, replacement=True, generator=gen)
            ood = ood.view(batch, n, n_ood).permute(0, 2, 1)  # (B, K, n)
            q_ood = mixer(_chosen(q_all, ood, val), s.unsqueeze(1).expand(-1, n_ood, -1))  # (B, K)
            conservative = (torch.logsumexp(torch.cat([q_ood, q_data[:, None]], 1), 1) - q_data).mean()
        else:
            gaps = []
            for i in range(n):
                cand = a.unsqueeze(1).repeat(1, n_act, 1)  # (B, A, n): agent i tries every action
                cand[:, :, i] = torch.arange(n_act)
                q_cf = mixer(_chosen(q_all, cand, val), s.unsqueeze(1).expand(-1, n_act, -1))  # (B, A)
                q_cf = q_cf.masked_fill(lg[:, i] < 0.5, NEG)
                gaps.append((torch.logsumexp(q_cf, 1) - q_data) * val[:, i])
            conservative = (torch.stack(gaps, 1).sum(1) / val.sum(1)).mean()
        loss = td + alpha * conservative
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_([*agent.parameters(), *mixer.parameters()], 10.0)
        opt.step()
        if step % 200 == 0:
            t_agent.load_state_dict(agent.state_dict())
            t_mixer.load_state_dict(mixer.state_dict())
    logger.info("%s: final td %.4f, conservative gap %.3f", method, td.item(), conservative.item())
    name = "QMIX + CQL" if method == "qmix_cql" else "CFCQL (QMIX)"
    return CQLPolicy(env_name, agent.eval(), name=name)
