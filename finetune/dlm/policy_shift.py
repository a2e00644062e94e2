"""How far GRPO moved the policy from SFT: first-action choices and KL on the same execution prompts.

For each prompt both models read the same chat prompt once; at the first completion position we compare
(a) the free-decoding first token (argmax over the vocabulary), (b) the legal-constrained choice (argmax
over the first tokens of the legal action words, which is what greedy constrained decoding picks when
every action word starts with its own token), and the KL divergences KL(GRPO || SFT) of the full next-token
distribution and of the distribution renormalised over the legal actions. Rates get Wilson intervals.

Given the run's offline rewards (`reward_best_actions`), it also counts how often each model's constrained
choice is the legal action those rewards score highest: where SFT already picks it, GRPO has no reason to
change the choice, so that share bounds how many choices the rewards can move. `reward_by_action` gives
each action's mean reward where legal and how often it is the best one.

`python bench/studies/dlm_policy_shift.py RUN_DIR --seeds 0 1 2 --prompts 240 --out report.json`
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eval.report import wilson
from finetune.dlm.decoding import action_token_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "action_rewards",
    "best_action",
    "compare_first_actions",
    "first_action_logits",
    "policy_shift",
    "reward_best_actions",
    "reward_best_labels",
    "reward_by_action",
    "run_grpo_prompts",
    "run_rewards",
    "shift_prompts",
]


@torch.no_grad()
def first_action_logits(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, prompts: list[list[dict]], batch_size: int = 8
) -> torch.Tensor:
    """(P, V) next-token log-probabilities at the first completion position of each chat prompt."""
    tok.padding_side = "left"
    out = []
    for i in range(0, len(prompts), batch_size):
        texts = [
            tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
            for p in prompts[i : i + batch_size]
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        logits = model(**enc).logits[:, -1].float()
        out.append(torch.log_softmax(logits, -1))
    return torch.cat(out)


def policy_shift(
    sft_dir: str | Path,
    grpo_dir: str | Path,
    env_name: str,
    samples: list[dict[str, Any]],
    batch_size: int = 8,
    rewards: list[Any] | None = None,
    weights: list[float] | None = None,
) -> dict[str, Any]:
    """Changed first-action choices (free and legal-constrained) and KL(GRPO || SFT) on `samples`; with the
    run's GRPO `rewards` and their `weights`, how often each model picks the reward-best legal action."""
    if rewards and (weights is None or len(weights) < len(rewards)):
        raise ValueError("`weights` must give one weight per reward function (GRPO's `reward_weights`).")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(sft_dir))
    first = [ids[0] for ids in action_token_ids(tok, env_name)]
    if len(set(first)) != len(first):
        raise ValueError(
            f"{env_name}'s action words share first tokens under this tokenizer; the first-token choice "
            "is not the constrained decode. Compare `generate_actions(..., constrained=True)` instead"
        )
    prompts = [s["prompt"] for s in samples]
    lp = {}
    for name, d in (("sft", sft_dir), ("grpo", grpo_dir)):
        model = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32).eval()
        lp[name] = first_action_logits(model, tok, prompts, batch_size)
        del model
    scores = action_rewards(samples, rewards, weights) if rewards else None
    best = [best_action(sc) for sc in scores] if scores else None
    report = compare_first_actions(lp["sft"], lp["grpo"], first, [s["legal"] for s in samples], best)
    return report | ({"reward_by_action": reward_by_action(scores)} if scores else {})


def action_rewards(
    samples: list[dict[str, Any]], rewards: list[Any], weights: list[float]
) -> list[dict[int, float]]:
    """For each sample, the weighted GRPO reward of every legal action (`rewards.reward_functions`,
    weighted by `weights` as GRPO weighs them; a None score counts 0, as TRL sums it)."""
    from finetune.dlm.dialogue import render_action

    out = []
    for s in samples:
        legal = list(s["legal"])
        comps = [[{"role": "assistant", "content": render_action(s["env"], a)}] for a in legal]
        cols = {k: [s[k]] * len(legal) for k in ("env", "legal", "action", "obs", "tier")}
        total = [0.0] * len(legal)
        for fn, w in zip(rewards, weights):
            for j, r in enumerate(fn(completions=comps, **cols)):
                total[j] += w * (r or 0.0)
        out.append(dict(zip(legal, total)))
    return out


def best_action(scores: dict[int, float]) -> int:
    """The action with the highest score; the first (in legal-action order) wins a tie."""
    return max(scores, key=scores.__getitem__)


def reward_best_actions(samples: list[dict[str, Any]], rewards: list[Any], weights: list[float]) -> list[int]:
    """For each sample, the legal action the weighted GRPO rewards (`action_rewards`) score highest."""
    return [best_action(scores) for scores in action_rewards(samples, rewards, weights)]


def reward_best_labels(
    samples: list[dict[str, Any]], rewards: list[Any], weights: list[float]
) -> list[dict[str, Any]]:
    """`samples` relabelled with their reward-best legal action as the completion (and `action`): SFT data
    for the control that asks whether the model can learn the choices its rewards prefer at all."""
    from finetune.dlm.dialogue import render_action

    return [
        s | {"action": a, "completion": [{"role": "assistant", "content": render_action(s["env"], a)}]}
        for s, a in zip(samples, reward_best_actions(samples, rewards, weights))
    ]


def reward_by_action(scores: list[dict[int, float]]) -> dict[int, dict[str, float]]:
    """Per action, over the samples where it is legal: its mean weighted reward, on how many samples it is
    legal and on how many it is the reward-best. Shows how strongly the rewards separate the actions on
    average (a collapsed policy plays one action everywhere) against how the best action varies per state."""
    table: dict[int, dict[str, float]] = {}
    for sc in scores:
        best = best_action(sc)
        for a, r in sc.items():
            row = table.setdefault(a, {"mean_reward": 0.0, "legal": 0, "best": 0})
            row["mean_reward"] += r
            row["legal"] += 1
            row["best"] += int(a == best)
    for row in table.values():
        row["mean_reward"] /= row["legal"]
    return dict(sorted(table.items()))


def compare_first_actions(
    lp_sft: torch.Tensor,
    lp_grpo: torch.Tensor,
    first: list[int],
    legal: list[list[int]],
    best: list[int] | None = None,
) -> dict[str, Any]:
    """Changed choices and KL(GRPO || SFT) from (P, V) first-position log-probabilities of both models;
    `first[a]` is action a's first token, `legal[i]` the legal actions of prompt i; with `best[i]` (the
    reward-best legal action), how often each model's constrained choice is it."""
    free_changed = int((lp_sft.argmax(-1) != lp_grpo.argmax(-1)).sum())
    kl_full = (lp_grpo.exp() * (lp_grpo - lp_sft)).sum(-1)
    legal_changed, kl_legal, at_best = 0, [], {"sft": 0, "grpo": 0}
    picks: dict[str, dict[int, int]] = {"sft": {}, "grpo": {}}  # constrained choices per action index
    for i, lg in enumerate(legal):
        ids = torch.tensor([first[a] for a in lg])
        a, b = torch.log_softmax(lp_sft[i, ids], -1), torch.log_softmax(lp_grpo[i, ids], -1)
        choice = {"sft": lg[int(a.argmax())], "grpo": lg[int(b.argmax())]}
        legal_changed += int(choice["sft"] != choice["grpo"])
        kl_legal.append(float((b.exp() * (b - a)).sum()))
        for name, act in choice.items():
            picks[name][act] = picks[name].get(act, 0) + 1
            if best is not None:
                at_best[name] += int(act == best[i])
    n = len(legal)
    extra = {f"{name}_choices": dict(sorted(c.items())) for name, c in picks.items()}
    if best is not None:
        for name, k in at_best.items():
            extra |= {
                f"{name}_choice_is_reward_best": k,
                f"{name}_choice_is_reward_best_wilson": wilson(k, n),
            }
    return extra | dict(
        prompts=n,
        free_first_token_changed=free_changed,
        free_first_token_changed_rate=free_changed / n,
        free_first_token_changed_wilson=wilson(free_changed, n),
        legal_choice_changed=legal_changed,
        legal_choice_changed_rate=legal_changed / n,
        legal_choice_changed_wilson=wilson(legal_changed, n),
        kl_full_first_token_mean=float(kl_full.mean()),
        kl_legal_actions_mean=float(sum(kl_legal) / n),
    )


def run_rewards(run_dir: str | Path, seed: int, env: str) -> tuple[list | None, list[float] | None]:
    """A finished `latentworks dlm` run's offline GRPO rewards (its `config.json` and the seed's return
    model) and their weights, or (None, None) where the run used the online reward, which steps a simulator."""
    from finetune.dlm.return_model import ReturnModel
    from finetune.dlm.rewards import reward_functions

    root = Path(run_dir)
    cfg = json.loads((root / "config.json").read_text())["grpo"]
    if cfg["return_reward"] == "online":
        return None, None
    model = None
    if cfg["return_reward"] == "model":
        path = root / f"seed_{seed}" / f"return_{env}" / "return_model.pt"
        if not path.is_file():
            raise FileNotFoundError(
                f"no return model at {path}: run `latentworks dlm grpo` for seed {seed} first"
            )
        model = ReturnModel.load(path)
    funcs = reward_functions(cfg["return_reward"], cfg["agreement_tiers"], model)
    return funcs, list(cfg["reward_weights"])


def run_grpo_prompts(run_dir: str | Path, seed: int) -> list[dict[str, Any]]:
    """The prompts a finished `latentworks dlm` run GRPO-trained seed `seed` on: the draw of `grpo_prompts`
    with the run's own `config.json` settings (tiers, `max_prompts`)."""
    from finetune.dlm.grpo import grpo_prompts, grpo_samples

    root = Path(run_dir)
    cfg = json.loads((root / "config.json").read_text())["grpo"]
    return grpo_prompts(grpo_samples(root / "data", cfg["tiers"], seed), cfg["max_prompts"], seed)


def shift_prompts(
    data_dir: str | Path, n: int, seeds: list[int], draw: int = 0
) -> dict[int, list[dict[str, Any]]]:
    """Per training seed, the seeded draw of `n` execution prompts from every tier of a run's dataset: the
    sample every policy-shift report of that seed compares its models on.

    `draw=k` (k >= 1) gives the k-th fresh sample: `n` prompts whose text none of draws 0..k-1 holds, so a
    recipe chosen after reading draw 0 can be checked on states that played no part in choosing it."""
    from finetune.dlm.data import load_dataset_dir
    from finetune.dlm.dialogue import to_samples

    if draw < 0:
        raise ValueError(f"draw must be 0 (the standard sample) or a later fresh draw >= 1, got {draw}")
    rows = list(load_dataset_dir(data_dir, tiers=["good", "medium", "poor"]))
    out = {}
    for seed in seeds:
        samples = to_samples(rows, teammate_prob=0.0, seed=seed)
        keys = [json.dumps(s["prompt"], sort_keys=True) for s in samples]
        left, seen = list(range(len(samples))), set()
        for k in range(draw + 1):
            if not left:
                raise ValueError(
                    f"draw {draw} needs {draw + 1} disjoint samples of {n}, but the pool of {len(samples)}"
                    f" prompts ran out at draw {k}: ask for fewer --prompts or an earlier draw"
                )
            # draw 0 keeps the original seeding, so committed reports stay reproducible
            rng = random.Random(f"policy-shift|{seed}" if k == 0 else f"policy-shift|{seed}|draw{k}")
            picked = rng.sample(left, min(n, len(left)))
            seen |= {keys[i] for i in picked}
            left = [i for i in left if keys[i] not in seen]
        out[seed] = [samples[i] for i in picked]
    return out
