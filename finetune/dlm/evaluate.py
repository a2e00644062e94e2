"""Online evaluation: policy proposal (text or index) -> parsed action -> legality check -> env step.

Every decision is counted; an unparseable or illegal proposal is counted as invalid and replaced with
the adapter's always-legal `fallback_action` before the environment is stepped (the adapters also
refuse illegal actions, so an uncounted illegal step cannot happen silently). Episodes of one seed run
in lockstep so an LM policy sees one batched prompt per time step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from finetune.dlm.dialogue import execution_prompt, parse_action
from finetune.dlm.envs import MultiAgentEnv, make_env

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = ["EVAL_SEED_OFFSET", "EvalStats", "LMPolicy", "Policy", "evaluate", "run_episodes", "summarize"]

logger = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 2_000_000_000  # above every data-generation seed, so evaluation starts are unseen


class Policy(Protocol):
    """Maps a batch of (local observation, legal actions, agent index) to proposals: action text or index."""

    name: str

    def act(
        self, env_name: str, batch: list[tuple[dict[str, Any], list[int], int]]
    ) -> list[str | int | None]:
        """One proposal per item; the evaluation loop parses text and counts unparseable or illegal ones."""


@dataclass
class EvalStats:
    """One seed's episodes."""

    episodes: int
    mean_return: float
    win_rate: float
    mean_length: float
    decisions: int
    unparseable: int
    illegal: int
    returns: list[float] = field(default_factory=list)  # per episode, in start-state order
    wins: list[bool] = field(default_factory=list)

    @property
    def invalid_rate(self) -> float:
        """Share of decisions that were unparseable or illegal (and so replaced by the fallback action)."""
        return (self.unparseable + self.illegal) / max(self.decisions, 1)


class LMPolicy:
    """A `LatentModel` prompted with the execution prompt (local observation only), greedy decoding.

    Decisions are memoised per prompt (greedy decoding is deterministic in it). Policies built on the same
    model can share `cache`: a constrained policy then reuses the free decode of a prompt whenever it is
    exactly a legal action word, since greedy constrained decoding picks the same token at every step
    when the unconstrained choice is allowed; only the other prompts are decoded again.
    """

    def __init__(
        self,
        lm: LatentModel,
        name: str,
        constrained: bool,
        max_new_tokens: int = 4,
        batch_size: int = 64,
        cache: dict[str, dict[tuple[str, str], str]] | None = None,
    ) -> None:
        self.lm, self.name, self.constrained = lm, name, constrained
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.cache = cache if cache is not None else {"free": {}, "constrained": {}}

    def _reuse_free(self, env_name: str, key: tuple[str, str], legal: list[int]) -> str | None:
        from finetune.dlm.dialogue import action_names

        text = self.cache["free"].get(key)
        names = action_names(env_name)
        return text if text in names and names.index(text) in legal else None

    def act(
        self, env_name: str, batch: list[tuple[dict[str, Any], list[int], int]]
    ) -> list[str | int | None]:
        """Greedy (optionally legality-constrained) decoded action text per item, memoised per prompt."""
        from finetune.dlm.decoding import generate_actions

        memo = self.cache["constrained" if self.constrained else "free"]
        prompts = [execution_prompt(env_name, o, lg) for o, lg, _ in batch]
        keys = [(env_name, p[-1]["content"]) for p in prompts]
        todo = {}
        for i, k in enumerate(keys):
            if k in memo or k in todo:
                continue
            reused = self._reuse_free(env_name, k, batch[i][1]) if self.constrained else None
            if reused is not None:
                memo[k] = reused
            else:
                todo[k] = i
        items = list(todo.items())
        for j in range(0, len(items), self.batch_size):
            chunk = items[j : j + self.batch_size]
            texts = generate_actions(
                self.lm,
                env_name,
                [prompts[i] for _, i in chunk],
                [batch[i][1] for _, i in chunk],
                self.constrained,
                self.max_new_tokens,
            )
            memo.update({k: t for (k, _), t in zip(chunk, texts)})
        return [memo[k] for k in keys]


def _to_action(env_name: str, proposal: Any) -> int | None:
    if isinstance(proposal, (int, np.integer)) and not isinstance(proposal, bool):
        return int(proposal)
    return parse_action(env_name, proposal)


def run_episodes(
    env_name: str,
    scenario: str,
    policy: Policy,
    episodes: int,
    seed: int | list[int],
    env_factory: Callable[[str, str], MultiAgentEnv] = make_env,
    progress: Any = None,
    max_steps: int | None = None,
) -> EvalStats | list[EvalStats]:
    """Run `episodes` episodes per seed, all seeds in lockstep, and account for every decision.

    Returns one `EvalStats` for an int `seed`, a list (one per seed) for a list of seeds. `max_steps`
    truncates episodes earlier than the environment's own limit (quick checks).
    """
    if episodes < 1:
        raise ValueError(f"`episodes` must be >= 1, got {episodes}.")
    seeds = [seed] if isinstance(seed, int) else list(seed)
    if not seeds:
        raise ValueError("no evaluation seeds given.")
    n = episodes * len(seeds)
    group = np.repeat(np.arange(len(seeds)), episodes)  # (n,) seed index of each episode
    envs = [env_factory(env_name, scenario) for _ in range(n)]
    for k, env in enumerate(envs):
        env.reset(EVAL_SEED_OFFSET + seeds[group[k]] * 10_000 + k % episodes)
    returns, lengths = np.zeros(n), np.zeros(n, dtype=int)
    decisions, unparseable, illegal = (np.zeros(n, dtype=int) for _ in range(3))
    alive = list(range(n))
    while alive:
        views = [(envs[e].observations(), envs[e].legal_actions()) for e in alive]
        batch = [(o, lg, i) for obs, legal in views for i, (o, lg) in enumerate(zip(obs, legal))]
        if getattr(policy, "central", False):  # scripted reference: reads the full state, one env at a time
            proposals = [a for e in alive for a in policy.joint(envs[e])]
        else:
            proposals = policy.act(env_name, batch)
        if len(proposals) != len(batch):
            raise ValueError(
                f"policy {policy.name!r} returned {len(proposals)} proposals for {len(batch)} agents."
            )
        k, still = 0, []
        for e, (_, legal) in zip(alive, views):
            actions = []
            for lg in legal:
                a = _to_action(env_name, proposals[k])
                k += 1
                decisions[e] += 1
                if a is None:
                    unparseable[e] += 1
                    a = envs[e].fallback_action
                elif a not in lg:
                    illegal[e] += 1
                    a = envs[e].fallback_action
                actions.append(a)
            rewards, done = envs[e].step(actions)
            returns[e] += envs[e].team_reward(rewards)
            lengths[e] += 1
            if max_steps is not None and lengths[e] >= max_steps:
                done = True
            if not done:
                still.append(e)
            elif progress is not None:
                progress.update(1)
        alive = still
    won = np.array([env.won() for env in envs], dtype=float)
    stats = [
        EvalStats(
            episodes=episodes,
            mean_return=float(returns[group == g].mean()),
            win_rate=float(won[group == g].mean()),
            mean_length=float(lengths[group == g].mean()),
            decisions=int(decisions[group == g].sum()),
            unparseable=int(unparseable[group == g].sum()),
            illegal=int(illegal[group == g].sum()),
            returns=[float(v) for v in returns[group == g]],
            wins=[bool(v) for v in won[group == g]],
        )
        for g in range(len(seeds))
    ]
    return stats[0] if isinstance(seed, int) else stats


def _ci95(values: list[float]) -> float:
    """Half-width of the Student-t 95% interval of the mean over seeds (0 for a single seed)."""
    if len(values) < 2:
        return 0.0
    from scipy import stats

    return float(stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values)))


def summarize(per_seed: list[EvalStats]) -> dict[str, Any]:
    """Mean and 95% CI over seeds of return, win rate and invalid-action rate."""
    out: dict[str, Any] = {"seeds": [asdict(s) | {"invalid_rate": s.invalid_rate} for s in per_seed]}
    for key in ("mean_return", "win_rate", "invalid_rate", "mean_length"):
        vals = [float(getattr(s, key)) for s in per_seed]
        out[key] = float(np.mean(vals))
        out[key + "_ci95"] = _ci95(vals)
    out["decisions"] = sum(s.decisions for s in per_seed)
    out["fallbacks"] = sum(s.unparseable + s.illegal for s in per_seed)
    return out


def evaluate(
    env_name: str, scenario: str, policy: Policy, episodes: int, seeds: list[int], progress: Any = None
) -> dict[str, Any]:
    """`run_episodes` over several seeds, summarised with confidence intervals."""
    per_seed = run_episodes(env_name, scenario, policy, episodes, list(seeds), progress=progress)
    res = summarize(per_seed)
    logger.info(
        "%s on %s: return %.3f, win %.2f, invalid %.4f",
        policy.name,
        scenario,
        res["mean_return"],
        res["win_rate"],
        res["invalid_rate"],
    )
    return res
