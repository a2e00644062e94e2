"""The rows of the hand-off table (`bench/studies/handoff.py`, `latentworks finetune mas --task handoff`, the
demo): each runs `agents.run` on `agents.handoff_graph(len(shares), mode)` and scores the answer.

Across two models (`Pair`): the holders run the sender, the answerer the row's model, and the latent
rows read the holders' thoughts through the pair's bridge; no_info and oracle are the answerer alone, and
the bytes of a latent row are the thought floats handed across (k x sender width per holder)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import agents
from agents.handoff import PROMPT_SET
from eval.report import wilson
from eval.scoring import score
from eval.tasks import handoff as th
from eval.tasks.registry import Item

if TYPE_CHECKING:
    from latent import LatentModel
    from latent.bridge import Bridge

# row -> (method, edge mode, thoughts, oracle prompt)
ROWS = {
    "no_info": ("single", "kv", "real", False),
    "oracle": ("single", "kv", "real", True),
    "text_mas": ("text_mas", "text", "real", False),
    "latent_kv": ("latent_mas", "kv", "real", False),
    "latent_kv_random": ("latent_mas", "kv", "random", False),
    "latent_only": ("latent_mas", "latent", "real", False),
    "latent_only_random": ("latent_mas", "latent", "random", False),
    "latent_only_other": ("latent_mas", "latent", "other", False),
    "latent_only_const": ("latent_mas", "latent", "mean", False),
}
# The rows a hand-off across two models has: kv edges never cross models (the caches differ)
PAIR_ROWS = tuple(r for r, (_, mode, _, _) in ROWS.items() if mode != "kv" or r in ("no_info", "oracle"))
SENDER, BRIDGE = "sender", "bridge"  # the holders' model key and the bridge's name in a pair's graph
K_SWEEP = (1, 2, 4, 8, 16)
# A sum answer that shows its working ("23 + 14 = 37." then the box) takes 19 tokens: every table decodes
# up to this many.
MAX_NEW_TOKENS = 24


@dataclass
class Row:
    name: str
    correct: int
    n: int
    bytes_in: float
    s_per_item: float

    def cells(self) -> list[str]:
        lo, hi = wilson(self.correct, self.n)
        return [
            self.name,
            f"{self.correct}/{self.n} ({100 * self.correct / self.n:.1f}%)",
            f"{100 * lo:.1f}-{100 * hi:.1f}%",
            f"{self.bytes_in:.0f}",
            f"{self.s_per_item:.3f}",
        ]


@dataclass
class Pair:
    """A hand-off across two models: the holders run `sender`; `bridge` carries their thoughts."""

    sender: LatentModel
    bridge: Bridge


def _batch_size(n: int, want: int) -> int:
    """A batch size near `want` that leaves no batch of one (the `other` control mixes rows)."""
    for bs in range(min(want, n), 1, -1):
        if n % bs != 1:
            return bs
    return max(n, 1)


def run_row(
    model: LatentModel,
    items: list[th.HandoffItem],
    name: str,
    k: int,
    max_new_tokens: int,
    batch: int,
    pair: Pair | None = None,
) -> Row:
    """Row `name` on `items`: `model` answers (and holds, unless `pair` gives the holders another model)."""
    method, mode, thoughts, oracle = ROWS[name]
    if pair is not None and name not in PAIR_ROWS:
        raise ValueError(f"row {name!r} hands on a kv cache, which cannot cross models; rows: {PAIR_ROWS}.")
    cross = pair is not None and method != "single"  # no_info and oracle: the answerer alone
    models = {"default": model, SENDER: pair.sender} if cross else model
    across = {"bridges": {BRIDGE: pair.bridge}} if cross else {}
    correct, bytes_in, wall = 0, 0.0, 0.0
    groups: dict[int, list[th.HandoffItem]] = {}
    for it in items:
        groups.setdefault(len(it.shares), []).append(it)
    for n_sh, group in groups.items():
        qs = [th.oracle_question(it) if oracle else it.question for it in group]
        kw = {} if method == "single" else {"shares": [it.shares for it in group]}
        t0 = time.perf_counter()
        graph = agents.handoff_graph(n_sh, mode, SENDER if cross else None, BRIDGE if cross else None)
        res = agents.run(
            graph, models, qs, method=method, prompts=PROMPT_SET, latent_steps=k, thoughts=thoughts,
            max_new_tokens=max_new_tokens, batch_size=_batch_size(len(group), batch), threads=None,
            **kw, **across,
        )  # fmt: skip
        wall += time.perf_counter() - t0
        for it, r in zip(group, res):
            correct += bool(score(Item(it.id, it.question, it.answer, "math"), r.text).correct)
            final = r.agents[-1]
            if method == "text_mas":
                bytes_in += sum(len((a.text or "").encode()) for a in r.agents[:-1])
            elif cross and method == "latent_mas":  # thought floats handed across, per holder
                width = pair.sender.hidden_size * pair.sender.dtype.itemsize
                bytes_in += sum(a.latent_steps * width for a in r.agents[:-1])
            else:
                bytes_in += final.kv_bytes_in
    return Row(name, correct, len(items), bytes_in / len(items), wall / len(items))
