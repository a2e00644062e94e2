"""Offline multi-agent datasets: scripted rollouts of graded quality stored with `datasets` + a returns card.

One row per (episode, step) holding every agent's local observation (JSON), legal actions, action and
reward, plus the full state (JSON) so rewards can replay a short horizon. Observations and actions are
all DLM's SFT uses; rewards are kept for the offline-RL baseline and the returns card.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from finetune.dlm.config import DataConfig, split_scenario
from finetune.dlm.envs import make_env
from finetune.dlm.policies import ScriptedPolicy

__all__ = ["DATA_SCHEMA_VERSION", "collect_episodes", "generate_dataset", "load_dataset_dir"]

logger = logging.getLogger(__name__)

DATA_SCHEMA_VERSION = "dlm-trajectories/1"


def collect_episodes(
    env_name: str, scenario: str, tier: str, episodes: int, seed: int, progress: Any = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Roll out `episodes` episodes of the `tier` scripted policy; return (step rows, episode summaries)."""
    if episodes < 1:
        raise ValueError(f"`episodes` must be >= 1, got {episodes}.")
    env = make_env(env_name, scenario)
    policy = ScriptedPolicy(tier, seed=seed)
    rows, summaries = [], []
    for ep in range(episodes):
        ep_seed = seed * 1_000_003 + ep  # disjoint from evaluation seeds (see evaluate.EVAL_SEED_OFFSET)
        env.reset(ep_seed)
        done, ret, t, ep_rows = False, 0.0, 0, []
        while not done:
            obs, legal, state = env.observations(), env.legal_actions(), env.get_state()
            actions = policy(env)
            rewards, done = env.step(actions)
            ret += env.team_reward(rewards)
            ep_rows.append(
                {
                    "schema_version": DATA_SCHEMA_VERSION,
                    "env": env_name,
                    "scenario": scenario,
                    "tier": tier,
                    "episode": ep,
                    "t": t,
                    "obs": [json.dumps(o) for o in obs],
                    "legal": legal,
                    "actions": [int(a) for a in actions],
                    "rewards": rewards,
                    "team_reward": env.team_reward(rewards),
                    "done": done,
                    "state": json.dumps(state),
                }
            )
            t += 1
        won = env.won()
        for r in ep_rows:
            r["episode_return"], r["episode_won"] = ret, won
        rows += ep_rows
        summaries.append({"return": ret, "won": won, "length": t})
        if progress is not None:
            progress.update(1)
    return rows, summaries


def _card(summaries: dict[tuple[str, str], list[dict[str, Any]]], cfg: DataConfig) -> dict[str, Any]:
    stats = []
    for (scenario, tier), eps in summaries.items():
        rets = np.array([e["return"] for e in eps])
        stats.append(
            {
                "scenario": scenario,
                "tier": tier,
                "episodes": len(eps),
                "steps": int(sum(e["length"] for e in eps)),
                "return_mean": float(rets.mean()),
                "return_std": float(rets.std()),
                "win_rate": float(np.mean([e["won"] for e in eps])),
                "length_mean": float(np.mean([e["length"] for e in eps])),
            }
        )
    return {"schema_version": DATA_SCHEMA_VERSION, "env": cfg.env, "config": vars(cfg), "tiers": stats}


def _card_markdown(card: dict[str, Any]) -> str:
    lines = [
        f"# DLM offline dataset ({card['env']}, schema {card['schema_version']})",
        "",
        "Scripted expert mixed with random legal actions (good eps 0.05, medium 0.35, poor 0.8).",
        "",
        "| scenario | tier | episodes | steps | team return (mean +- std) | win rate | length |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in card["tiers"]:
        lines.append(
            f"| {s['scenario']} | {s['tier']} | {s['episodes']} | {s['steps']} | {s['return_mean']:.3f} +- "
            f"{s['return_std']:.3f} | {s['win_rate']:.2f} | {s['length_mean']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def generate_dataset(cfg: DataConfig, out_dir: str | Path) -> dict[str, Any]:
    """Generate every (scenario, tier) of `cfg`, save the Arrow dataset and the card; return the card."""
    from datasets import Dataset
    from tqdm.auto import tqdm

    out = Path(out_dir)
    rows: list[dict[str, Any]] = []
    summaries: dict[tuple[str, str], list[dict[str, Any]]] = {}
    total = len(cfg.scenarios) * len(cfg.tiers) * cfg.episodes_per_tier
    with tqdm(total=total, desc="dlm data (episodes)") as bar:
        for si, scenario in enumerate(cfg.scenarios):
            for ti, tier in enumerate(cfg.tiers):
                seed = cfg.seed * 1000 + si * 10 + ti
                env_name, name = split_scenario(cfg.env, scenario)
                r, s = collect_episodes(env_name, name, tier, cfg.episodes_per_tier, seed, progress=bar)
                rows += r
                summaries[(scenario, tier)] = s
    Dataset.from_list(rows).save_to_disk(str(out / "trajectories"))
    card = _card(summaries, cfg)
    (out / "card.json").write_text(json.dumps(card, indent=2))
    (out / "README.md").write_text(_card_markdown(card))
    logger.info("wrote %d steps to %s", len(rows), out)
    return card


def load_dataset_dir(data_dir: str | Path, tiers: list[str] | None = None):
    """Load a saved trajectory dataset, checking its schema version; optionally keep some tiers."""
    from datasets import load_from_disk

    path = Path(data_dir) / "trajectories"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no trajectory dataset under {str(data_dir)!r}: run `latentworks dlm data` first."
        )
    ds = load_from_disk(str(path))
    versions = set(ds["schema_version"]) if "schema_version" in ds.column_names else {"<none>"}
    if versions != {DATA_SCHEMA_VERSION}:
        raise ValueError(
            f"dataset at {str(path)!r} has schema {sorted(versions)}, this code reads {DATA_SCHEMA_VERSION!r}: "
            "regenerate it with `latentworks dlm data`."
        )
    if tiers is not None:
        ds = ds.filter(lambda r: r["tier"] in tiers)
        if len(ds) == 0:
            raise ValueError(f"no rows of tiers {tiers} in {str(path)!r}.")
    return ds
