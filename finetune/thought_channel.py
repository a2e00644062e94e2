"""Train the thought channel: the latent hand-off between agents, for any causal LM (one trainer, one loop).

Every loss runs the inference path: `agents.final_agent_view` over a `WorkingMemory(grad=True)`, so the
upstream agents think k thoughts each (`LatentModel.think_with_grad`) and the final agent is scored on
what it writes after reading them; gradients flow through every thought into the weights that produced
them (Coconut-style training of continuous thoughts). Thoughts per agent grow over `latent_curriculum`.

Two tasks, one loop (`train`):
- `arith` (`eval/tasks/arith_data.py`): text batches give a random role of the default graphs 0-3 upstream
  drafts laid out as text_mas hands them on (some wrong; the target is always the correct solution);
  latent batches run a graph (sequential or hierarchical) as latent_mas and score the final agent.
- `handoff` (`eval/tasks/handoff.py`): each holder reads one share, the answerer only the question, so it
  can answer only from what the holders hand on. Text batches teach the note a holder hands on and the
  answer from notes (falling from most batches to `text_floor`); oracle batches see every share; latent
  batches score the answer after k thoughts per holder, plus an anti-shortcut term (after Interlat: the
  gold answer is pushed down under another item's or random thoughts), a thought-note term (thought j read
  through the output head spells note token j) and, optionally, a reader curriculum (note-token
  embeddings stand where the thoughts go, `token_thought_frac`) and an embedding term (`embed_weight`);
  `arith_frac` of the batches are solver SFT on arith problems no evaluated problem shares a signature with.

Trainable: every weight of a built-in model (its ridge aligner re-derived as `load_model` would), or a
LoRA + a trained aligner on any other model. With `sender` (hand-off across two models,
`finetune/bridge_channel.py`): a bridge from the frozen sender's thoughts into the frozen base (the
answerer; a LoRA with `trainable: lora`). A recipe YAML may hold `stages:` (each a set of overrides,
each stage starting from the previous one's weights). The result is saved under `name`: a built-in
model directory with a card, or the model cache (`load_model(NAME)` loads the adapter on its base).

Run: ``latentworks finetune mas --config finetune/recipes/arith-mini-v8.yaml``
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from eval.tasks import handoff as th
from eval.tasks import handoff_wordings as tw
from eval.tasks.arith_data import ROLE_SYSTEM_PROMPTS, make_context, make_problems, to_messages

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from latent import LatentModel
    from latent.memory import WorkingMemory

logger = logging.getLogger(__name__)
IGNORE = -100
TASKS = ("arith", "handoff")
GRAPHS = ("sequential", "hierarchical")
IRRELEVANT_NOTE = "-"  # what a holder hands on under `relevance_notes` when nobody asks about its share


def _f(default, help: str, **meta):  # noqa: A002  (the dataclass metadata key)
    kw = {"default_factory": lambda: list(default)} if isinstance(default, list) else {"default": default}
    return field(**kw, metadata={"help": help, **meta})


@dataclass
class ThoughtChannelConfig:
    """Every setting of thought-channel training; CLI flags, `--config` YAML recipes and Python fill it.

    Example:
        ```python
        from finetune.thought_channel import ThoughtChannelConfig, train_stages
        cfg = ThoughtChannelConfig(base="smollm2-135m-instruct", levels=["relay"], max_steps=40)
        train_stages([cfg])
        ```
    """

    # What to train and where it goes
    base: str = _f(
        "builtin:arith-mini", "model to start from: builtin:<name>, a pulled name, a hub id or a path"
    )
    task: str = _f("handoff", "what the channel learns to carry", choices=TASKS)
    name: str = _f("", "name the result is saved under ('' = <base name>-<task>)")
    version: int = _f(0, "version number written into the card (0 = none)")
    out_dir: str = _f("", "logs, checkpoints and stages ('' = runs/<name>)")
    export_dir: str = _f(
        "", "where the model goes ('' = out_dir/model for built-in bases, else the model cache)"
    )
    seed: int = _f(0, "seeds the data, the initialisation and the controls")
    threads: int = _f(1, "torch CPU threads")
    autocast: str = _f(
        "none",
        "none, bfloat16 (training forward passes under torch.autocast: matmuls in bf16; weights, optimizer and "
        "held-out evaluation stay float32), or auto: bfloat16 on a GPU or a CPU with bf16 instructions "
        "(avx512_bf16, AMX), else none; without them bf16 is emulated and many times slower",
        choices=("none", "bfloat16", "auto"),
    )
    context_length: int = _f(0, "raise the model's max_position_embeddings to this (RoPE; 0 = keep)")
    chat_template: str = _f("", "chat template for a base without one (gemma, chatml or a Jinja file); saved")
    # What is trained
    trainable: str = _f(
        "auto", "auto: every weight of a built-in model, else LoRA + aligner", choices=("auto", "all", "lora")
    )
    lora_r: int = _f(16, "LoRA rank (on q/k/v/o projections; alpha = 2 r)")
    aligner: str = _f("linear", "trained aligner of LoRA runs (ridge-initialised)", choices=("linear", "mlp"))
    # Hand-off across two models: a bridge
    sender: str = _f(
        "", "handoff: the holders' model; trains a bridge from its thoughts into `base` (both frozen)"
    )
    bridge: str = _f("linear", "bridge kind (sender thoughts -> base input space)", choices=("linear", "mlp"))
    bridge_lr: float = _f(1e-3, "learning rate of the bridge")
    # Optimisation and budget
    max_steps: int = _f(600, "optimizer steps the schedule spans (warmup, then cosine to 0)")
    stop_at: int = _f(0, "stop after this step, keeping the schedule of max_steps (0 = run it all)")
    batch_size: int = _f(8, "items per step")
    lr: float = _f(5e-4, "peak learning rate (AdamW)")
    aligner_lr: float = _f(1e-4, "learning rate of the trained aligner (LoRA runs)")
    warmup_steps: int = _f(20, "linear warmup steps")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_minutes: float = _f(0.0, "stop training after this many minutes (0 = no limit)")
    realign_every: int = _f(25, "steps between re-deriving the ridge aligner (full fine-tunes)")
    logging_steps: int = _f(25, "steps between log entries")
    save_steps: int = _f(100, "steps between resumable checkpoints")
    resume: bool = _f(False, "continue from the checkpoint in out_dir (and skip finished stages)")
    # Thoughts
    latent_steps: int = _f(4, "thoughts per upstream agent at the end of the curriculum")
    latent_curriculum: list[int] = _f([1, 2, 4], "thoughts per agent, stage by stage; ends at latent_steps")
    curriculum_frac: float = _f(0.5, "fraction of max_steps spent climbing the curriculum")
    # task arith: the default agent graphs
    graphs: list[str] = _f(list(GRAPHS), "arith: graphs latent batches run")
    prompt_sets: list[str] = _f(
        ["default"], "arith: prompt sets latent batches draw from (e.g. default compact)"
    )
    latent_frac: float = _f(0.5, "arith: share of latent batches (the rest: text with drafts)")
    max_drafts: int = _f(3, "arith: most upstream drafts in a text batch")
    wrong_draft_frac: float = _f(0.4, "arith: share of drafts that are wrong")
    hint_frac: float = _f(0.2, "arith: share of drafts that are an operation plan")
    problem_steps: list[int] = _f([1, 2, 2, 3, 3, 3, 4], "arith: operation counts, sampled")
    # task handoff: information split across agents
    levels: list[str] = _f(list(th.LEVELS), "handoff: levels, in turn step by step (repeat one to weight it)")
    wordings: str = _f(
        "plain", "handoff: plain (one template) or varied (many wordings, made-up names)", choices=tw.WORDINGS
    )
    text_until: float = _f(0.3, "handoff: fraction of steps over which text batches fall to text_floor")
    text_floor: float = _f(0.1, "handoff: share of text batches after that")
    oracle_frac: float = _f(0.1, "handoff: share of oracle batches (every share in one prompt)")
    arith_frac: float = _f(0.0, "handoff: share of solver SFT batches (signature-disjoint arith problems)")
    anti_weight: float = _f(0.5, "handoff: anti-shortcut weight (gold answer down under wrong thoughts)")
    anti_random_every: int = _f(4, "handoff: steps between anti-shortcut terms under random thoughts")
    note_weight: float = _f(1.0, "handoff: weight of thought j spelling the note's token j")
    embed_weight: float = _f(0.0, "handoff: weight pulling realigned thought j to note token j's embedding")
    token_thought_frac: float = _f(0.0, "handoff: share of latent batches reading note embeddings at first")
    token_thought_until: float = _f(0.5, "handoff: fraction of steps over which that share falls to 0")
    kv_frac: float = _f(0.0, "handoff: share of latent batches on kv edges (holder prompt + thoughts)")
    working_levels: list[str] = _f([], "handoff: levels whose answers show 'a + b = s.' before the box")
    relevance_notes: bool = _f(False, "handoff: a holder whose share names nobody asked about hands on '-'")
    random_names: float = _f(
        0.0, "handoff: share of items whose people get made-up names (never a test name)"
    )
    arith_skip_test_sums: bool = _f(False, "handoff: no arith line adds two hand-off test sum values")
    # Evaluation
    eval_n: int = _f(
        64, "held-out items per level / problems per method and graph, before and after (0 = none)"
    )
    eval_seed: int = _f(2024, "seed of the held-out arith problems (hand-off: the seed-0 test split)")
    max_new_tokens: int = _f(
        0,
        "decode budget of the held-out evaluation (0 = the task's: arith 96, handoff 24 as the hand-off table)",
    )

    def __post_init__(self) -> None:
        p = []

        def need(ok: bool, msg: str) -> None:
            if not ok:
                p.append(msg)

        need(
            bool(self.base.strip()),
            "`base` must name a model (builtin:<name>, a pulled name, a hub id or a path)",
        )
        need(bool(self.graphs) and set(self.graphs) <= set(GRAPHS), f"`graphs` must be a subset of {GRAPHS}")
        need(bool(self.prompt_sets), "`prompt_sets` must name at least one prompt set, e.g. [default]")
        need(
            bool(self.levels) and set(self.levels) <= set(th.LEVELS),
            f"`levels` must be a subset of {th.LEVELS}",
        )
        need(set(self.working_levels) <= set(self.levels), "`working_levels` must be among `levels`")
        need(self.wordings in tw.WORDINGS, f"`wordings` must be one of {tw.WORDINGS}, got {self.wordings!r}")
        need(
            self.wordings == "plain" or self.random_names == 0,
            "`random_names` renames the plain wording's people; the varied wordings' names are made up "
            "already: set `random_names` 0",
        )
        c = self.latent_curriculum
        need(
            bool(c) and min(c) >= 1 and c[-1] == self.latent_steps,
            f"`latent_curriculum` must be counts >= 1 ending at `latent_steps` ({self.latent_steps}), "
            f"got {c}",
        )
        for n in (
            "latent_frac",
            "curriculum_frac",
            "wrong_draft_frac",
            "hint_frac",
            "text_floor",
            "oracle_frac",
            "arith_frac",
            "kv_frac",
            "random_names",
            "token_thought_frac",
        ):
            need(0 <= getattr(self, n) <= 1, f"`{n}` must be in [0, 1], got {getattr(self, n)}")
        for n in ("text_until", "token_thought_until"):
            need(getattr(self, n) > 0, f"`{n}` must be > 0, got {getattr(self, n)}")
        need(self.wrong_draft_frac + self.hint_frac <= 1, "`wrong_draft_frac` + `hint_frac` must be <= 1")
        need(0 <= self.max_drafts <= 3, f"`max_drafts` must be in 0-3, got {self.max_drafts}")
        need(
            bool(self.problem_steps) and all(1 <= s <= 4 for s in self.problem_steps),
            f"`problem_steps` must be operation counts in 1-4, got {self.problem_steps}",
        )
        for n in (
            "batch_size",
            "max_steps",
            "threads",
            "realign_every",
            "logging_steps",
            "save_steps",
            "lora_r",
            "anti_random_every",
            "latent_steps",
        ):
            need(getattr(self, n) >= 1, f"`{n}` must be >= 1, got {getattr(self, n)}")
        need(0 <= self.stop_at <= self.max_steps, f"`stop_at` must be in 0-`max_steps`, got {self.stop_at}")
        need(
            self.task != "handoff" or self.batch_size >= 2 or self.anti_weight == 0,
            "`batch_size` must be >= 2 for the anti-shortcut term (it reads another item's thoughts); "
            "or set `anti_weight` 0",
        )
        need(
            min(
                self.eval_n,
                self.max_minutes,
                self.warmup_steps,
                self.context_length,
                self.version,
                self.max_new_tokens,
            )
            >= 0,
            "`eval_n`, `max_minutes`, `warmup_steps`, `context_length`, `version` and `max_new_tokens` must be >= 0",
        )
        need(
            self.lr > 0 and self.aligner_lr > 0 and self.bridge_lr > 0,
            "`lr`, `aligner_lr` and `bridge_lr` must be > 0",
        )
        if self.sender:
            need(self.task == "handoff", "`sender` trains a hand-off bridge: set `task` handoff")
            need(self.trainable != "all", "`sender` keeps the base frozen: `trainable` auto (bridge) or lora")
            for n in ("kv_frac", "token_thought_frac", "arith_frac"):
                need(not getattr(self, n), f"`{n}` is not used with `sender` (a bridge): set it to 0")
        if self.chat_template:
            from latent.tokenizer import chat_template

            try:  # checked here so that a typo fails before any model is loaded
                chat_template(self.chat_template)
            except ValueError as err:
                p.append(f"`chat_template`: {str(err).rstrip('.')}")
        if p:
            raise ValueError("invalid ThoughtChannelConfig: " + "; ".join(p) + ".")
        short = [m.removeprefix("builtin:").rstrip("/").split("/")[-1] for m in (self.sender, self.base)]
        auto = f"{short[0]}-to-{short[1]}-bridge" if self.sender else f"{short[1]}-{self.task}"
        self.name = self.name or auto
        self.out_dir = self.out_dir or f"runs/{self.name}"

    @property
    def builtin(self) -> bool:
        """True when every weight trains (`trainable` all, or auto on a built-in base)."""
        if self.sender:
            return False
        return self.trainable == "all" or (self.trainable == "auto" and self.base.startswith("builtin:"))

    @property
    def export_path(self) -> Path:
        """Where the trained model is saved."""
        if self.export_dir:
            return Path(self.export_dir)
        if self.builtin:
            return Path(self.out_dir) / "model"
        from latent.catalogue import cache_dir

        return cache_dir() / "models" / self.name

    def thoughts_at(self, step: int) -> int:
        """Thoughts per upstream agent at optimizer step `step` (the curriculum stage)."""
        ramp, stages = self.curriculum_frac * self.max_steps, self.latent_curriculum
        if ramp <= 0 or step >= ramp:
            return stages[-1]
        return stages[min(int(step / ramp * len(stages)), len(stages) - 1)]

    def lr_factor(self, step: int) -> float:
        """Linear warmup over `warmup_steps`, times a cosine from 1 to 0 over `max_steps`."""
        return (
            min(1.0, (step + 1) / max(self.warmup_steps, 1))
            * 0.5
            * (1 + math.cos(math.pi * step / self.max_steps))
        )


# ----------------------------------------------------------------------------- token sequences


def ids_and_labels(tok: PreTrainedTokenizerBase, msgs: list[dict], target: str, eos: bool = True):
    """(ids, labels) of a chat prompt and its assistant target; labels are IGNORE on the prompt."""
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    p = tok(text, add_special_tokens=False)["input_ids"]
    c = tok(target + (tok.eos_token if eos else ""), add_special_tokens=False)["input_ids"]
    return p + c, [IGNORE] * len(p) + c


def left_pad(seqs: list[tuple[list[int], list[int]]], pad: int):
    """Left-padded (ids, attention mask, labels), each (B, T), of (ids, labels) pairs."""
    n = max(len(x) for x, _ in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    labels = torch.full((len(seqs), n), IGNORE, dtype=torch.long)
    for r, (x, y) in enumerate(seqs):
        ids[r, n - len(x) :], mask[r, n - len(x) :], labels[r, n - len(y) :] = (
            torch.tensor(x),
            1,
            torch.tensor(y),
        )
    return ids, mask, labels


def token_logp(lm: LatentModel, seqs, state=None):
    """Per-token log-probs (B, T-1) of the labels after `state` (a `LatentState` or None), and their mask
    (0 where the mask is False). The head runs on the labelled positions only: a prompt's B x T x V logits
    would be gigabytes at a 150k vocabulary, and three such passes a step ran a 0.5B model out of memory."""
    ids, mask, labels = left_pad(seqs, int(lm.tokenizer.pad_token_id))
    hidden, _ = lm.forward_embeds(lm.embed(ids.to(lm.device)), mask.to(lm.device), state)
    lab = labels[:, 1:].to(hidden.device)
    keep = lab != IGNORE
    rows, cols = keep.nonzero(as_tuple=True)
    logits = lm.logits(hidden[:, :-1][rows, cols])  # (N, V): one row per labelled token
    picked = logits.log_softmax(-1).gather(-1, lab[rows, cols][:, None])[:, 0]
    logp = torch.zeros(lab.shape, dtype=picked.dtype, device=picked.device).index_put((rows, cols), picked)
    return logp, keep.to(picked.device)


def sft_loss(lm: LatentModel, seqs, state=None) -> torch.Tensor:
    """Mean cross-entropy of the label tokens of `seqs`, read after `state`."""
    logp, keep = token_logp(lm, seqs, state)
    return -(logp * keep).sum() / keep.sum()


# ----------------------------------------------------------------------------- task arith


def arith_batch(cfg: ThoughtChannelConfig, lm: LatentModel, step: int, rng: random.Random):
    """(kind, loss, parts) of arith step `step`: a text batch (a random role with upstream drafts) or a
    latent batch (the final agent of a graph after the latent_mas memory, with gradients)."""
    from agents import Graph, PromptSet, RunConfig, final_agent_view, question_in_memory
    from latent.memory import WorkingMemory

    problems = []
    for i in range(step * cfg.batch_size, (step + 1) * cfg.batch_size):
        n_ops = random.Random(f"mas-steps|{cfg.seed}|{i}").choice(cfg.problem_steps)
        problems += make_problems(1, seed=cfg.seed * 1_000_003 + i, split="train", steps=(n_ops,))
    graph = Graph.resolve(rng.choice(cfg.graphs))
    if rng.random() >= cfg.latent_frac:
        prompts = PromptSet.load(cfg.prompt_sets[0])
        upstream = [a for a in graph.order() if a != graph.final]  # who a text draft is credited to
        seqs = []
        for p in problems:
            drafts = []
            for who in upstream[: rng.randint(0, cfg.max_drafts)]:
                u = rng.random()
                kind = (
                    "wrong_draft"
                    if u < cfg.wrong_draft_frac
                    else "hint"
                    if u < cfg.wrong_draft_frac + cfg.hint_frac
                    else "draft"
                )
                drafts.append((who, make_context(p, kind, rng)))
            msgs = prompts.messages(rng.choice(sorted(ROLE_SYSTEM_PROMPTS)), p.question, drafts)
            seqs.append(ids_and_labels(lm.tokenizer, msgs, p.solution))
        return "text", sft_loss(lm, seqs), {}
    ps = rng.choice(cfg.prompt_sets)
    run = RunConfig(method="latent_mas", latent_steps=cfg.thoughts_at(step), threads=None, prompts=ps)
    questions = [p.question for p in problems]
    _, state = final_agent_view(graph, lm, questions, run, WorkingMemory(lm, grad=True))
    again = question_in_memory(graph, graph.final, "latent_mas")
    role = graph.agent(graph.final).role
    msgs = [PromptSet.load(ps).messages(role, q, question_in_memory=again) for q in questions]
    seqs = [ids_and_labels(lm.tokenizer, m, p.solution) for m, p in zip(msgs, problems)]
    return "latent", sft_loss(lm, seqs, state), {}


# ----------------------------------------------------------------------------- task handoff: targets


def share_parts(share: str) -> tuple[str, str | None]:
    """(whose share it is: its first word, its last number or None): "Sara's code is 53" -> ("Sara", "53")."""
    nums = re.findall(r"\d+", share)
    return re.split(r"['\s]", share.strip(), maxsplit=1)[0], (nums[-1] if nums else None)


def holder_note(share: str, question: str, relevance: bool = False, note: str | None = None) -> str:
    """The note a holder is trained to hand on: the number first, then whose it is ("53 Sara"), so the
    first thoughts carry the number; with `relevance`, "-" when the question names nobody the share is
    about. An item's own `note` ("53 Tavi", varied wordings) stands for the share's first word and number."""
    name, number = note.split(" ", 1)[::-1] if note else share_parts(share)
    if relevance and name and not re.search(rf"\b{re.escape(name)}\b", question):
        return IRRELEVANT_NOTE
    return f"{number} {name}" if number is not None else share


def answer_target(item: th.HandoffItem, working: bool = False) -> str:
    """The answer the answerer is trained to write: the box, or, with `working` on an item whose answer
    is the sum of its shares' numbers, the addition line first, as the arith solutions write it."""
    box = f"\\boxed{{{item.answer}}}"
    nums = (
        [n.split(" ", 1)[0] for n in item.notes] if item.notes else [share_parts(s)[1] for s in item.shares]
    )
    nums = [n for n in nums if n is not None]
    if working and len(nums) == len(item.shares) > 1 and str(sum(map(int, nums))) == item.answer:
        return " + ".join(nums) + f" = {item.answer}.\n" + box
    return box


def item_note(item: th.HandoffItem, i: int, relevance: bool = False) -> str:
    """Holder `i`'s note for `item` (`holder_note`), from the item's own note when it carries one."""
    return holder_note(item.shares[i], item.question, relevance, item.notes[i] if item.notes else None)


def made_up_name(rng: random.Random) -> str:
    """A pronounceable name of 1-3 syllables that is neither a test-split name nor contains or is
    contained in one ("Zoey" is refused as well as "Zoe")."""
    tests = [n.lower() for n in th.TEST_NAMES]
    while True:
        syl = [rng.choice("bdfghjklmnprstvwz") + rng.choice("aeiou") for _ in range(rng.choice((1, 2, 2, 3)))]
        name = "".join(syl) + (rng.choice("bdfghjklmnprstvwz") if rng.random() < 0.4 else "")
        if len(name) >= 3 and not any(t in name or name in t for t in tests):
            return name.capitalize()


def train_items(cfg: ThoughtChannelConfig, level: str, step: int) -> list[th.HandoffItem]:
    """The hand-off items of step `step`: the generator's train split, with `random_names` of them
    renamed (the same made-up name in shares and question), or with `wordings` varied the many-wordings
    generator's train split. Seeded by step alone, so they can be recounted."""
    make = tw.make_items if cfg.wordings == "varied" else th.make_items
    items = make(level, cfg.batch_size, "train", seed=cfg.seed * 100003 + step)
    if cfg.random_names <= 0:
        return items
    rng = random.Random(f"handoff-names-{cfg.seed}-{step}")
    pattern = re.compile(r"\b(" + "|".join(th.TRAIN_NAMES) + r")\b")
    out = []
    for it in items:
        if rng.random() >= cfg.random_names:
            out.append(it)
            continue
        names: dict[str, str] = {}
        for n in dict.fromkeys(pattern.findall(" ".join(it.shares) + " " + it.question)):
            names[n] = made_up_name(rng)
            while names[n] in [v for k, v in names.items() if k != n]:  # two people never share a name
                names[n] = made_up_name(rng)

        def sub(text: str, names=names) -> str:
            return pattern.sub(lambda m: names[m.group(1)], text)

        out.append(th.HandoffItem(it.id, [sub(x) for x in it.shares], sub(it.question), it.answer))
    return out


def arith_stream(cfg: ThoughtChannelConfig) -> list:
    """The solver SFT problems of a hand-off run: signature-disjoint from the evaluated arith problems and,
    with `arith_skip_test_sums`, free of any line adding two hand-off test sum values."""
    from eval.tasks.arith_data import signature_disjoint_train, solution_signature

    n = cfg.max_steps * cfg.batch_size
    if cfg.arith_frac <= 0:
        return []
    if not cfg.arith_skip_test_sums:
        return signature_disjoint_train(n, cfg.seed)
    test = set(th.values("test", 10, 49))
    pool = signature_disjoint_train(2 * n + 64, cfg.seed)
    return [
        p
        for p in pool
        if not any(o == "+" and a in test and b in test for a, o, b, _ in solution_signature(p))
    ][:n]


def heldout_checks(cfg: ThoughtChannelConfig) -> dict:
    """Recount what a hand-off stage trained on against what is evaluated: items holding a test-split value
    or name, arith problems with an evaluated problem's solution signature, and arith lines adding two
    hand-off test sum values (a sum test item's working line). All should be 0."""
    from eval.tasks.arith_data import eval_signatures, solution_signature

    test_vals, test_sum = set(th.values("test")), set(th.values("test", 10, 49))
    name_re = re.compile(r"\b(" + "|".join(th.TEST_NAMES) + r")\b")
    items = bad = 0
    for step in range(cfg.stop_at or cfg.max_steps):
        for it in train_items(cfg, cfg.levels[step % len(cfg.levels)], step):
            items += 1
            vals = {int(x) for x in re.findall(r"\d+", " ".join(it.shares + (it.notes or [])))}
            text = " ".join(it.shares) + " " + it.question
            bad += bool(vals & test_vals or name_re.search(text) or tw.holds_test_name(it))
    sigs = [solution_signature(p) for p in arith_stream(cfg)]
    banned = eval_signatures()
    return {
        "handoff_train_items": items,
        "handoff_train_items_with_a_test_value_or_name": bad,
        "arith_problems": len(sigs),
        "arith_with_an_evaluated_signature": sum(s in banned for s in sigs),
        "arith_adding_two_test_sum_values": sum(
            any(o == "+" and a in test_sum and b in test_sum for a, o, b, _ in s) for s in sigs
        ),
    }


# ----------------------------------------------------------------------------- task handoff: losses


def latent_state(
    lm: LatentModel,
    items,
    k: int,
    thoughts: str = "real",
    memory: WorkingMemory | None = None,
    edge: str = "latent",
):
    """The answerer's messages and the state it reads (the holders' thoughts; `edge="kv"`: each holder's
    prompt and thoughts), with gradients."""
    import agents
    from agents.handoff import PROMPT_SET
    from latent.memory import WorkingMemory

    run = agents.RunConfig(prompts=PROMPT_SET, latent_steps=k, threads=None, thoughts=thoughts)
    g = agents.handoff_graph(len(items[0].shares), edge)
    mem = memory if memory is not None else WorkingMemory(lm, grad=True)
    return agents.final_agent_view(
        g, lm, [it.question for it in items], run, mem, shares=[it.shares for it in items]
    )


def note_targets(lm: LatentModel, items, holder: int, k: int, relevance: bool = False) -> torch.Tensor:
    """Token ids (B, k) of the first k tokens of holder `holder`'s note, IGNORE past the note's end."""
    target = torch.full((len(items), k), IGNORE, dtype=torch.long)
    for r, it in enumerate(items):
        ids = lm.tokenizer(item_note(it, holder, relevance), add_special_tokens=False)
        target[r, : len(ids["input_ids"][:k])] = torch.tensor(ids["input_ids"][:k])
    return target


class NoteThoughts:
    """An aligner that returns, at holder i's thought j, the input embedding of note token j (where the
    note has one; the model's own realigned thought elsewhere). Holders think in graph order, k steps
    each, so the calls are counted off in that order."""

    def __init__(self, lm: LatentModel, items, k: int, relevance: bool = False) -> None:
        self.base, self.k, self.calls = lm.aligner, k, 0
        targets = [note_targets(lm, items, i, k, relevance) for i in range(len(items[0].shares))]
        emb = lm.model.get_input_embeddings()
        self.embeds = [emb(t.clamp(min=0).to(lm.device)).detach() for t in targets]  # (B, k, D) per holder
        self.known = [(t != IGNORE).to(lm.device) for t in targets]  # (B, k)

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        holder, j = divmod(self.calls, self.k)
        if holder >= len(self.embeds):
            raise RuntimeError(
                f"NoteThoughts serves {len(self.embeds)} holders x {self.k} thoughts; called again."
            )
        self.calls += 1
        own = self.base(hidden)
        return torch.where(self.known[holder][:, j, None], self.embeds[holder][:, j].to(own.dtype), own)


def token_thought_state(lm: LatentModel, items, k: int, memory: WorkingMemory, relevance: bool = False):
    """`latent_state` with the note tokens' input embeddings fed where the thoughts go (`NoteThoughts`)."""
    from latent.model import LatentModel as _LM

    was_training = lm.model.training
    teacher = _LM(lm.model, lm.tokenizer, realign=NoteThoughts(lm, items, k, relevance))
    lm.model.train(was_training)  # the constructor puts the shared network in eval mode
    return latent_state(teacher, items, k, memory=memory)


def _latents(mem: WorkingMemory):
    return [s for s in mem.segments if s.kind == "latent"]


def thought_note_loss(lm: LatentModel, mem: WorkingMemory, items, relevance: bool = False) -> torch.Tensor:
    """Cross-entropy of each holder's thoughts, read through the output head, against its note's first k
    tokens: thought j stands where note token j would (Coconut-style replacement of the text hand-off)."""
    losses = []
    for i, seg in enumerate(_latents(mem)):
        logits = lm.logits(seg.hidden)  # (B, k, V)
        target = note_targets(lm, items, i, seg.hidden.shape[1], relevance).reshape(-1).to(logits.device)
        losses.append(
            nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target, ignore_index=IGNORE)
        )
    return torch.stack(losses).mean()


def thought_embed_loss(lm: LatentModel, mem: WorkingMemory, items, relevance: bool = False) -> torch.Tensor:
    """Relative squared distance of each realigned thought j (the aligner on the hidden state thought j
    comes from) to the input embedding of note token j; reaches the aligner and, through it, the LoRA."""
    emb, losses = lm.model.get_input_embeddings(), []
    for i, seg in enumerate(_latents(mem)):
        target = note_targets(lm, items, i, seg.hidden.shape[1], relevance).to(lm.device)  # (B, k)
        known = target != IGNORE
        want = emb(target.clamp(min=0)).detach().float()  # (B, k, D)
        d = (lm.aligner(seg.hidden).float() - want).pow(2).sum(-1) / want.pow(2).sum(-1).clamp_min(1e-6)
        losses.append((d * known).sum() / known.sum().clamp_min(1))
    return torch.stack(losses).mean()


def digit_ce(lm: LatentModel, seqs, logp: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the answer's digit tokens only (the part that must come from the shares)."""
    lab = left_pad(seqs, int(lm.tokenizer.pad_token_id))[2][:, 1:]
    dec = lm.tokenizer.decode
    digit = torch.tensor([[int(t) != IGNORE and dec([int(t)]).strip().isdigit() for t in row] for row in lab])
    sel = digit.to(logp.device) & keep
    return -(logp * sel).sum() / sel.sum().clamp_min(1)


def latent_loss(
    lm: LatentModel,
    items,
    k: int,
    anti_weight: float,
    seed: int,
    with_random: bool = True,
    note_weight: float = 0.0,
    embed_weight: float = 0.0,
    token_thoughts: bool = False,
    edge: str = "latent",
    working: bool = False,
    relevance: bool = False,
) -> tuple[torch.Tensor, dict]:
    """Answer cross-entropy after k thoughts per holder, plus the weighted terms; (loss, logged parts).

    `token_thoughts`: the note tokens' embeddings stand where the thoughts go; the note and embed terms then
    train the writer on the holder's hidden states under the note tokens. On kv edges the random-thought part
    of the anti-shortcut term is skipped: the holder's prompt, which the answerer reads too, holds the
    share."""
    from agents.latentmas import derangement
    from latent.memory import WorkingMemory

    mem = WorkingMemory(lm, grad=True)
    if token_thoughts:
        msgs, state = token_thought_state(lm, items, k, mem, relevance)
    else:
        msgs, state = latent_state(lm, items, k, memory=mem, edge=edge)
    targets = [answer_target(it, working) for it in items]
    seqs = [ids_and_labels(lm.tokenizer, m, t) for m, t in zip(msgs, targets)]
    logp, keep = token_logp(lm, seqs, state.copy())
    loss = -(logp * keep).sum() / keep.sum()
    name = "token" if token_thoughts else "latent"
    parts = {
        f"{name}_ce": float(loss.detach()),
        f"{name}_ce_digits": float(digit_ce(lm, seqs, logp, keep).detach()),
    }
    for key, weight, term in (
        ("embed", embed_weight, thought_embed_loss),
        ("note", note_weight, thought_note_loss),
    ):
        if weight > 0:
            value = term(lm, mem, items, relevance)
            parts[key] = float(value.detach())
            loss = loss + weight * value
    if anti_weight > 0:
        # with working, only the operands copied from the thoughts ("23 + 14") are pushed down
        anti_seqs = [
            ids_and_labels(lm.tokenizer, m, t.split(" =")[0], eos=False) if " = " in t else s
            for m, s, t in zip(msgs, seqs, targets)
        ]
        states = [state.select_rows(derangement(len(items), seed))]
        if with_random and edge == "latent":
            states.append(latent_state(lm, items, k, thoughts="random")[1])
        anti = []
        for st in states:
            lp, kp = token_logp(lm, anti_seqs, st)
            p_gold = (lp * kp).sum(1).div(kp.sum(1)).exp()  # geometric-mean token prob of the gold answer
            anti.append(-torch.log1p(-p_gold.clamp(max=1 - 1e-4)).mean())
        parts["anti"] = float(torch.stack(anti).mean().detach())
        loss = loss + anti_weight * torch.stack(anti).mean()
    return loss, parts


def text_seqs(
    tok: PreTrainedTokenizerBase, items, rng: random.Random, working: bool = False, relevance: bool = False
):
    """Text hand-off samples: a holder -> its note, or the answerer reading the notes -> the answer."""
    from agents import PromptSet
    from agents.handoff import PROMPT_SET

    prompts, seqs = PromptSet.load(PROMPT_SET), []
    for it in items:
        if rng.random() < 0.5:
            i = rng.randrange(len(it.shares))
            msgs = prompts.messages("holder", it.question, share=it.shares[i])
            seqs.append(ids_and_labels(tok, msgs, item_note(it, i, relevance)))
        else:
            notes = [(f"holder_{i}", item_note(it, i, relevance)) for i in range(len(it.shares))]
            seqs.append(
                ids_and_labels(
                    tok, prompts.messages("answerer", it.question, notes), answer_target(it, working)
                )
            )
    return seqs


def oracle_seqs(tok: PreTrainedTokenizerBase, items, working: bool = False):
    """The answerer with every share in its prompt -> the answer (keeps the ceiling)."""
    from agents import PromptSet
    from agents.handoff import PROMPT_SET

    prompts = PromptSet.load(PROMPT_SET)
    return [
        ids_and_labels(tok, prompts.messages("answerer", th.oracle_question(it)), answer_target(it, working))
        for it in items
    ]


def handoff_batch(cfg: ThoughtChannelConfig, lm: LatentModel, step: int, rng: random.Random, arith: list):
    """(kind, loss, parts) of hand-off step `step`: arith SFT, text, oracle or latent, by the schedule."""
    prog = step / cfg.max_steps
    text_p = max(cfg.text_floor, 1 - (1 - cfg.text_floor) * prog / cfg.text_until)
    level = cfg.levels[step % len(cfg.levels)]
    items, working = train_items(cfg, level, step), level in cfg.working_levels
    u, a = rng.random(), cfg.arith_frac if arith else 0.0
    if u < a:
        ps = arith[step * cfg.batch_size : (step + 1) * cfg.batch_size]
        return (
            "arith",
            sft_loss(lm, [ids_and_labels(lm.tokenizer, to_messages(p), p.solution) for p in ps]),
            {},
        )
    if u < a + (1 - a) * text_p:
        return "text", sft_loss(lm, text_seqs(lm.tokenizer, items, rng, working, cfg.relevance_notes)), {}
    if u < a + (1 - a) * (text_p + cfg.oracle_frac):
        return "oracle", sft_loss(lm, oracle_seqs(lm.tokenizer, items, working)), {}
    edge = "kv" if cfg.kv_frac > 0 and rng.random() < cfg.kv_frac else "latent"
    tok_p = cfg.token_thought_frac * max(0.0, 1 - prog / cfg.token_thought_until)
    token = edge == "latent" and tok_p > 0 and rng.random() < tok_p
    loss, parts = latent_loss(
        lm,
        items,
        cfg.thoughts_at(step),
        cfg.anti_weight,
        cfg.seed + step,
        step % cfg.anti_random_every == 0,
        cfg.note_weight,
        cfg.embed_weight,
        token,
        edge,
        working,
        cfg.relevance_notes,
    )
    return ("token" if token else "latent_kv" if edge == "kv" else "latent"), loss, parts


# ----------------------------------------------------------------------------- task handoff across two models


def bridge_loss(
    cfg: ThoughtChannelConfig,
    lm: LatentModel,
    sender: LatentModel,
    bridge: nn.Module,
    items,
    k: int,
    seed: int,
    with_random: bool,
    working: bool = False,
) -> tuple[torch.Tensor, dict]:
    """Answer cross-entropy after the bridged thoughts, plus the anti-shortcut and embedding terms."""
    from agents.latentmas import derangement
    from finetune.bridge_channel import bridge_state, bridged_embed_loss
    from latent.memory import WorkingMemory

    mem = WorkingMemory(lm, grad=True)
    msgs, state = bridge_state(lm, sender, bridge, items, k, memory=mem)
    targets = [answer_target(it, working) for it in items]
    seqs = [ids_and_labels(lm.tokenizer, m, t) for m, t in zip(msgs, targets)]
    logp, keep = token_logp(lm, seqs, state.copy())
    loss = -(logp * keep).sum() / keep.sum()
    parts = {
        "bridge_ce": float(loss.detach()),
        "bridge_ce_digits": float(digit_ce(lm, seqs, logp, keep).detach()),
    }
    if cfg.embed_weight > 0:
        notes = [note_targets(lm, items, i, k, cfg.relevance_notes) for i in range(len(items[0].shares))]
        value = bridged_embed_loss(lm, bridge, mem, notes, IGNORE)
        parts["embed"] = float(value.detach())
        loss = loss + cfg.embed_weight * value
    if cfg.anti_weight > 0:
        states = [state.select_rows(derangement(len(items), seed))]
        if with_random:
            states.append(bridge_state(lm, sender, bridge, items, k, thoughts="random")[1])
        # with working, only the operands copied from the thoughts ("23 + 14") are pushed down
        anti_seqs = [
            ids_and_labels(lm.tokenizer, m, t.split(" =")[0], eos=False) if " = " in t else s
            for m, s, t in zip(msgs, seqs, targets)
        ]
        anti = []
        for st in states:
            lp, kp = token_logp(lm, anti_seqs, st)
            p_gold = (lp * kp).sum(1).div(kp.sum(1)).exp()  # geometric-mean token prob of the gold answer
            anti.append(-torch.log1p(-p_gold.clamp(max=1 - 1e-4)).mean())
        parts["anti"] = float(torch.stack(anti).mean().detach())
        loss = loss + cfg.anti_weight * torch.stack(anti).mean()
    return loss, parts


def bridge_batch(
    cfg: ThoughtChannelConfig,
    lm: LatentModel,
    step: int,
    rng: random.Random,
    sender: LatentModel,
    bridge: nn.Module,
) -> tuple[str, torch.Tensor, dict]:
    """(kind, loss, parts) of step `step`: a bridged latent batch, or (receiver LoRA only) an oracle batch."""
    level = cfg.levels[step % len(cfg.levels)]
    items, working = train_items(cfg, level, step), level in cfg.working_levels
    if cfg.trainable == "lora" and rng.random() < cfg.oracle_frac:
        return "oracle", sft_loss(lm, oracle_seqs(lm.tokenizer, items, working)), {}
    with_random = step % cfg.anti_random_every == 0
    k, seed = cfg.thoughts_at(step), cfg.seed + step
    loss, parts = bridge_loss(cfg, lm, sender, bridge, items, k, seed, with_random, working)
    return "bridge", loss, parts


# ----------------------------------------------------------------------------- the loop


def prepare(cfg: ThoughtChannelConfig, lm: LatentModel):
    """(trainable model, AdamW parameter groups): every weight, or a LoRA + a trained aligner on a frozen
    base."""
    from latent.model import LatentModel
    from latent.realign import TrainableAligner

    if cfg.builtin:
        for p in lm.model.parameters():
            p.requires_grad_(True)
        return lm, [{"params": list(lm.model.parameters()), "lr": cfg.lr}]
    from peft import LoraConfig, get_peft_model

    from latent.loading import peft_warnings_silenced

    for p in lm.model.parameters():
        p.requires_grad_(False)
    if cfg.sender and cfg.trainable != "lora":
        return lm, []  # a frozen receiver: only the bridge trains
    torch.manual_seed(cfg.seed)
    aligner = TrainableAligner.from_model(lm, kind=cfg.aligner)
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=2 * cfg.lora_r,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        lora_dropout=0.0,
    )
    with peft_warnings_silenced():
        net = get_peft_model(lm.model, lora)
    groups = [{"params": [p for p in net.parameters() if p.requires_grad], "lr": cfg.lr}]
    if cfg.sender:  # the receiver only reads: its aligner is never used
        return LatentModel(net, lm.tokenizer), groups
    groups.append({"params": list(aligner.parameters()), "lr": cfg.aligner_lr})
    return LatentModel(net, lm.tokenizer, realign=aligner), groups


def _checkpoint(
    cfg: ThoughtChannelConfig, lm: LatentModel, opt, step: int, log: list, wall: float, bridge=None
) -> None:
    state = {n: p.detach() for n, p in lm.model.named_parameters() if p.requires_grad}
    aligner = lm.aligner.state_dict() if isinstance(lm.aligner, nn.Module) else None
    if bridge is not None:
        state |= {f"bridge.{n}": v.detach() for n, v in bridge.state_dict().items()}
    path = Path(cfg.out_dir) / "checkpoint.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "step": step,
            "params": state,
            "aligner": aligner,
            "opt": opt.state_dict(),
            "log": log,
            "wall": wall,
        },
        path.with_suffix(".partial"),
    )
    os.replace(path.with_suffix(".partial"), path)


def autocast_dtype(setting: str, device: torch.device) -> torch.dtype | None:
    """The dtype training forward passes autocast to (None: plain float32). `auto` takes bfloat16 only where
    it is computed in hardware: a CUDA device, or a CPU with avx512_bf16 or AMX. Elsewhere PyTorch emulates
    bf16: on a 2-core AVX2 EPYC a Qwen 0.5B hand-off step took 403 s in bf16 against 10 s in float32."""
    from latent.loading import native_bf16_cpu

    native = device.type == "cuda" or (device.type == "cpu" and native_bf16_cpu())
    if setting == "auto":
        return torch.bfloat16 if native else None
    if setting == "bfloat16" and not native:
        logger.warning(
            "autocast bfloat16 on a CPU without bf16 instructions (avx512_bf16 or AMX): PyTorch emulates "
            "it, and training runs many times slower than in float32 (about 40x measured). Use "
            "--autocast auto (float32 here) or none."
        )
    return torch.bfloat16 if setting == "bfloat16" else None


@contextlib.contextmanager
def frozen_linears_in_bf16(models: list[nn.Module]):
    """Hold every frozen Linear weight (a LoRA's base layers, the output head) in bfloat16 while training
    under bf16 autocast, and put the float32 tensors back after. Autocast casts a weight that needs no
    gradient anew at every call and keeps the copy for the backward pass; a hand-off step runs the whole
    model once per latent step, so on Qwen 0.5B those copies reached 24 GB and the run died. Cast once, the
    products are the same numbers. A head tied to the input embedding stays float32 (the embedding feeds
    the residual stream)."""
    saved = []
    for model in models:
        tied = model.get_input_embeddings().weight
        for mod in model.modules():
            if isinstance(mod, nn.Linear) and not mod.weight.requires_grad and mod.weight is not tied:
                saved.append((mod, mod.weight, mod.bias))
                mod.weight = nn.Parameter(mod.weight.detach().to(torch.bfloat16), requires_grad=False)
                if mod.bias is not None:
                    mod.bias = nn.Parameter(mod.bias.detach().to(torch.bfloat16), requires_grad=False)
    try:
        yield
    finally:
        for mod, weight, bias in saved:
            mod.weight, mod.bias = weight, bias


def train(
    cfg: ThoughtChannelConfig,
    lm: LatentModel,
    sender: LatentModel | None = None,
    bridge: nn.Module | None = None,
) -> tuple[LatentModel, list[dict], float]:
    """The training loop (AdamW, warmup + cosine, clip 1.0); returns the trained model, its log and wall s.
    With `sender` and `bridge` (bridge mode) the bridge trains in place, the holders running `sender`."""
    torch.manual_seed(cfg.seed)
    lm, groups = prepare(cfg, lm)
    if bridge is not None:
        groups.append({"params": list(bridge.parameters()), "lr": cfg.bridge_lr})
    opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
    base_lrs = [g["lr"] for g in opt.param_groups]  # before a resumed state brings its scheduled values
    start, log, wall, ckpt = 0, [], 0.0, Path(cfg.out_dir) / "checkpoint.pt"
    if cfg.resume and ckpt.is_file():
        saved = torch.load(ckpt, weights_only=False)
        params = dict(lm.model.named_parameters())
        if bridge is not None:
            params |= {f"bridge.{n}": v for n, v in bridge.state_dict().items()}
        with torch.no_grad():
            for n, v in saved["params"].items():
                params[n].copy_(v)
        if saved["aligner"] is not None:
            lm.aligner.load_state_dict(saved["aligner"])
        opt.load_state_dict(saved["opt"])
        start, log, wall = saved["step"], saved["log"], saved["wall"]
        logger.info("resumed at step %d from %s", start, ckpt)
    arith = arith_stream(cfg) if cfg.task == "handoff" else []
    end, t0, window = cfg.stop_at or cfg.max_steps, time.perf_counter() - wall, {}
    batch = arith_batch if cfg.task == "arith" else lambda *a: handoff_batch(*a, arith)
    if bridge is not None:
        batch = lambda *a: bridge_batch(*a, sender, bridge)  # noqa: E731
    from tqdm.auto import tqdm

    lm.model.train()
    lm.refresh_aligner()
    bar = tqdm(total=end, initial=start, desc=f"train {cfg.name}", unit="step", dynamic_ncols=True)
    models = [lm.model] + ([sender.model] if sender is not None else [])
    amp = autocast_dtype(cfg.autocast, lm.device)
    logger.info("training forward passes in %s", "bfloat16 (autocast)" if amp else "float32")
    with frozen_linears_in_bf16(models) if amp else contextlib.nullcontext():
        for step in range(start, end):
            for g, base_lr in zip(opt.param_groups, base_lrs):
                g["lr"] = base_lr * cfg.lr_factor(step)
            # per step, so a resumed run draws the same batches
            rng = random.Random(f"channel|{cfg.seed}|{step}")
            with torch.autocast(lm.device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
                kind, loss, parts = batch(cfg, lm, step, rng)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
            opt.step()
            if cfg.builtin and (step + 1) % cfg.realign_every == 0:
                lm.refresh_aligner()  # the ridge map `load_model` derives from the embeddings, kept current
            window.setdefault(kind, []).append(float(loss.detach()))
            bar.update(1)
            done = step + 1 == end or (cfg.max_minutes and time.perf_counter() - t0 > 60 * cfg.max_minutes)
            if (step + 1) % cfg.logging_steps == 0 or done:
                losses = [v for vs in window.values() for v in vs]
                entry = {
                    "step": step + 1,
                    "s": round(time.perf_counter() - t0, 1),
                    "k": cfg.thoughts_at(step),
                    "loss": round(sum(losses) / len(losses), 4),
                }
                entry |= {f"loss_{k}": round(sum(v) / len(v), 4) for k, v in window.items()}
                log.append(entry | {k: round(v, 4) for k, v in parts.items()})
                logger.info(json.dumps(log[-1]))
                window = {}
            if (step + 1) % cfg.save_steps == 0 and not done:
                _checkpoint(cfg, lm, opt, step + 1, log, time.perf_counter() - t0, bridge)
            if done:
                if step + 1 < end:
                    logger.info(
                        "time budget (%s min) reached after step %d; stopping", cfg.max_minutes, step + 1
                    )
                break
    bar.close()
    lm.model.eval()
    lm.refresh_aligner()
    return lm, log, time.perf_counter() - t0


# ----------------------------------------------------------------------------- models in and out


def load_base(cfg: ThoughtChannelConfig) -> LatentModel:
    """The base model, its context raised to `context_length` and its chat template set when asked."""
    from latent import load_model

    lm = load_model(cfg.base, device=None if torch.cuda.is_available() else "cpu")
    if cfg.context_length:
        lm.model.config.max_position_embeddings = cfg.context_length  # RoPE: no new weights
    if cfg.chat_template:
        from latent.tokenizer import chat_template

        lm.tokenizer.chat_template = chat_template(cfg.chat_template)  # saved with the model
    if lm.tokenizer.chat_template is None:
        raise ValueError(
            f"{cfg.base!r} has no chat template, which the agents' prompts need: pass "
            "`--chat-template gemma` (or chatml, or a Jinja file)."
        )
    return lm


def save_model(lm: LatentModel, out: str | Path, base: str = "") -> Path:
    """Save a trained channel where `load_model(out)` (or, in the cache, `load_model(NAME)`) finds it: the
    weights + tokenizer of a full fine-tune, or the LoRA adapter + aligner + tokenizer, the adapter naming
    its base as given (`base`: a pulled name, builtin:<name> or a hub id), not as a path on this machine,
    so the adapter loads wherever that base is. The previous copy stays whole until the new one is in
    place."""
    out = Path(out)
    tmp, old = out.with_name(out.name + ".partial"), out.with_name(out.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    lm.model.config.use_cache = True
    lm.model.save_pretrained(tmp, safe_serialization=True)
    lm.tokenizer.save_pretrained(tmp)
    if isinstance(lm.aligner, nn.Module) and hasattr(lm.aligner, "save"):
        lm.aligner.save(tmp / "aligner.safetensors")
    adapter = tmp / "adapter_config.json"
    if adapter.is_file() and base:
        conf = json.loads(adapter.read_text())
        conf["base_model_name_or_path"] = os.path.abspath(base) if os.path.exists(base) else base
        adapter.write_text(json.dumps(conf, indent=2))
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def train_stages(stages: list[ThoughtChannelConfig], command: str = "") -> dict:
    """Train each stage from the previous one's model, save the last under its name, evaluate it before
    and after, and write its card; returns the card. A finished stage (its `stage.json`) is skipped under
    `resume`."""
    from finetune import channel_report as report

    torch.set_num_threads(stages[0].threads)
    first, last = stages[0], stages[-1]
    before = {}
    # the base's held-out table is kept beside the checkpoints, so a resumed run does not evaluate it again;
    # it is read back only when it was made under the same evaluation settings
    saved_before = Path(first.out_dir) / "eval_before.json"
    partial = Path(first.out_dir) / "eval_before.partial.json"  # rows of a stopped evaluation of the base
    settings = report.eval_settings(last)
    saved = report.read_table(saved_before, settings) if last.eval_n and first.resume else None
    if saved is not None:
        before = saved
    elif last.eval_n:
        if first.resume and saved_before.is_file():
            logger.info(
                "%s was made under other evaluation settings; evaluating the base again", saved_before
            )
        base = load_base(first)
        if first.sender:  # a bridge: before training, the ridge-initialised bridge between the two models
            from eval.tasks.handoff_rows import Pair
            from finetune.bridge_channel import setup

            before = report.evaluate(first, base, Pair(*setup(first, base)), partial=partial)
        else:
            before = report.evaluate(first, base, partial=partial)
        del base
        saved_before.parent.mkdir(parents=True, exist_ok=True)
        saved_before.write_text(json.dumps({"settings": settings, "rows": before}, indent=2))
    done = []
    for cfg in stages:
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
        marker = Path(cfg.out_dir) / "stage.json"
        if cfg.resume and marker.is_file() and cfg.export_path.exists():
            done.append(json.loads(marker.read_text()))
            continue
        if cfg.sender:
            from finetune import bridge_channel

            lm = load_base(cfg)
            sender, bridge = bridge_channel.setup(cfg, lm)
            lm, log, wall = train(cfg, lm, sender, bridge)
            trained = any(p.requires_grad for p in lm.model.parameters())  # a receiver LoRA
            receiver = save_model(lm, bridge_channel.receiver_path(cfg), cfg.base) if trained else None
            bridge_channel.save(cfg, bridge, receiver)
        else:
            lm, log, wall = train(cfg, load_base(cfg))
            save_model(lm, cfg.export_path, cfg.base)
        done.append(
            {
                "config": dataclasses.asdict(cfg),
                "heldout_checks": heldout_checks(cfg) if cfg.task == "handoff" else None,
                "steps": log[-1]["step"] if log else 0,
                "wall_s": round(wall, 1),
                "log": log,
            }
        )
        marker.write_text(json.dumps(done[-1], indent=2))
        (Path(cfg.out_dir) / "checkpoint.pt").unlink(missing_ok=True)
    return report.write_card(last, done, before, command)


def stage_configs(args: argparse.Namespace) -> list[ThoughtChannelConfig]:
    """The configs of every stage, all validated before anything loads: the recipe's top level, then each
    of its `stages:` overrides, then the flags (which win). Stage i > 1 starts from stage i - 1's model and
    writes under out_dir/stage-i; only the last stage saves under `name` and is evaluated."""
    from latent.args import UsageError, config_from_args, read_yaml

    recipe = read_yaml(args.config) if getattr(args, "config", None) else {}
    stages = recipe.pop("stages", None) or [{}]
    if not isinstance(stages, list) or not all(isinstance(s, dict) for s in stages):
        raise UsageError(f"`stages` in {args.config} must be a list of mappings of settings. Fix the file")
    plain = argparse.Namespace(**{**vars(args), "config": None})
    top = config_from_args(ThoughtChannelConfig, plain, presets=recipe)
    if len(stages) > 1 and not top.builtin:
        raise UsageError(
            "a recipe with several `stages` trains every weight: use a built-in base or "
            "`trainable: all` (LoRA stages would stack adapters)"
        )
    cfgs: list[ThoughtChannelConfig] = []
    for i, over in enumerate(stages):
        fixed = {}
        if len(stages) > 1:
            fixed = {"name": top.name, "out_dir": f"{top.out_dir}/stage-{i + 1}"}
            if i + 1 < len(stages):
                fixed |= {"export_dir": f"{top.out_dir}/stage-{i + 1}/model", "eval_n": 0}
            else:
                fixed |= {"export_dir": str(top.export_path)}
        if i:
            fixed["base"] = str(cfgs[-1].export_path)
        cfgs.append(config_from_args(ThoughtChannelConfig, plain, presets={**recipe, **over}, **fixed))
    return cfgs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`latentworks finetune mas` flags: one per `ThoughtChannelConfig` field, plus `--config RECIPE.yaml`."""
    from latent.args import add_config_arguments

    add_config_arguments(parser, ThoughtChannelConfig)


def run(args: argparse.Namespace) -> int:
    """Train every stage of the parsed recipe and flags; log the held-out tables and where the model is."""
    from finetune import channel_report as report

    cfgs = stage_configs(args)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    command = "latentworks finetune mas" + (
        f" --config {args.config}" if getattr(args, "config", None) else ""
    )
    card = train_stages(cfgs, command)
    logger.info("%s", report.card_tables(card))
    logger.info(
        "trained %.1f min in %d stage(s); model in %s",
        card["wall_time_s"] / 60,
        len(cfgs),
        cfgs[-1].export_path,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m finetune.thought_channel`: the same command as `latentworks finetune mas`."""
    from latent.args import run_script

    return run_script("python -m finetune.thought_channel", __doc__.split("\n")[0], add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
