"""Train the thought channel to carry what only the upstream agents know (the hand-off task).

Every loss runs the inference path: `agents.final_agent_view` over a `WorkingMemory(grad=True)` on
`agents.handoff_graph(n, "latent")`, so each holder reads its share and thinks k thoughts
(`LatentModel.think_with_grad`), and the answerer reads only those thoughts, then the question.
Batches, by curriculum (`text_until`, `k_schedule`):
- text: a holder learns to pass its share on as a note; the answerer learns to answer from the notes
  (the text hand-off); falls from most batches to `text_floor` of them;
- oracle: one prompt with every share and the question (keeps the ceiling);
- latent: cross-entropy of the answer after k thoughts per holder, k growing 1 -> `latent_steps`, plus
  an anti-shortcut term (after Interlat): the gold answer is pushed down when the answerer reads another
  item's thoughts or same-norm random ones, so the answer must come from this item's thoughts;
  optional (off by default): a reader curriculum that first feeds the note tokens' own embeddings where
  the thoughts go (`token_thought_frac`), and a term pulling each realigned thought toward the embedding of
  the note token it stands for (`embed_weight`);
- arith (built-in models): solver SFT on train-split problems whose solution signature (numbers and
  operations) no evaluated problem has (`eval.arith_data.signature_disjoint_train`).
Options that are off by default: `kv_frac` runs that share of the latent batches on kv edges (the
answerer reads each holder's prompt and thoughts, as `latent_kv` does at inference); `working_levels`
lets the answer show its working in the arith style ("23 + 14 = 37." then the box); `relevance_notes`
has a holder whose share is about nobody the question names hand on "-"; `random_names` gives that
share of the training items fresh made-up names (never a test name), so that matching a name is learned
as a general skill rather than over the 24 training names.
Trainable: all weights (built-in models) or a LoRA + a linear aligner (any HF causal LM).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

import agents
from agents.config import RunConfig
from agents.handoff import PROMPT_SET
from agents.latentmas import derangement
from agents.prompts import PromptSet
from eval import tasks_handoff as th
from latent.memory import WorkingMemory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from latent import LatentModel

logger = logging.getLogger(__name__)
IGNORE = -100


@dataclass
class HandoffTrainConfig:
    """Settings of hand-off training; the CLI (`latentworks finetune mas --task handoff`) fills it."""

    base: str = "builtin:arith-mini"
    out_dir: str = "runs/handoff"
    lora: bool = False  # False: train every weight (built-in models)
    lora_r: int = 16
    aligner: str = "linear"  # trained for LoRA runs; built-in runs re-derive the ridge map
    levels: list[str] = field(default_factory=lambda: list(th.LEVELS))
    latent_steps: int = 4
    k_schedule: list[int] = field(default_factory=lambda: [1, 2, 4])
    steps: int = 600
    batch_size: int = 16
    lr: float = 1e-3
    aligner_lr: float = 1e-4
    text_until: float = 0.3  # fraction of steps over which text batches fall to `text_floor`
    text_floor: float = 0.1
    oracle_frac: float = 0.1
    arith_frac: float = 0.0
    anti_weight: float = 0.5
    note_weight: float = 1.0  # thoughts read through the output head should spell the note
    anti_random_every: int = 4  # the random-thought term every this many latent batches (it costs a pass)
    # Off by default (the behaviour above stays as it was):
    kv_frac: float = 0.0  # share of latent batches on kv edges (holder prompt + thought KV): latent_kv
    working_levels: list[str] = field(default_factory=list)  # these levels' answers show "a + b = s." first
    relevance_notes: bool = False  # a holder whose share names nobody in the question hands on "-"
    arith_skip_test_sums: bool = False  # drop arith problems adding two hand-off test values (sum's pairs)
    random_names: float = 0.0  # share of training items whose people get made-up names (never a test name)
    # Reader curriculum (0 = off): this share of latent batches at the start, falling linearly to 0 at
    # `token_thought_until` of the steps, feeds the note's own token embeddings where the thoughts go
    # (Coconut's stage 0 seen from the reader's side), so the answerer first learns to read note KV there.
    token_thought_frac: float = 0.0
    token_thought_until: float = 0.5
    # Aligner term (0 = off): realigned thought j is pulled toward the input embedding of note token j, so
    # the thoughts the answerer reads look like the note tokens it learned to read.
    embed_weight: float = 0.0
    save_every: int = 100
    realign_every: int = 25
    max_minutes: float = 0.0
    seed: int = 0
    threads: int = 1
    log_every: int = 25

    def k_at(self, progress: float) -> int:
        stages = self.k_schedule
        return (
            stages[min(int(progress / 0.5 * len(stages)), len(stages) - 1)] if progress < 0.5 else stages[-1]
        )


def share_parts(share: str) -> tuple[str, str | None]:
    """(whose share it is: its first word, the share's last number or None): "Sara's code is 53" ->
    ("Sara", "53")."""
    import re

    nums = re.findall(r"\d+", share)
    return re.split(r"['\s]", share.strip(), maxsplit=1)[0], (nums[-1] if nums else None)


def note_of(share: str) -> str:
    """The note a holder is trained to hand on: the number first, then whose it is ("53 Sara"), so the
    first thoughts, which stand where the note's first tokens would, carry the number."""
    name, number = share_parts(share)
    return f"{number} {name}" if number is not None else share


def target_text(answer: str) -> str:
    return f"\\boxed{{{answer}}}"


IRRELEVANT_NOTE = "-"


def holder_note(share: str, question: str, relevance: bool = False) -> str:
    """The note a holder hands on; with `relevance`, "-" when the share's owner is not named in the
    question (pick: the holder of the other person's number has nothing the answerer needs)."""
    import re

    if relevance:
        name = share_parts(share)[0]
        if name and not re.search(rf"\b{re.escape(name)}\b", question):
            return IRRELEVANT_NOTE
    return note_of(share)


def answer_target(item: th.HandoffItem, working: bool = False) -> str:
    """The answer the answerer is trained to write: the box, or, with `working` on an item whose answer
    is the sum of its shares' numbers, the addition line first, as the arith solutions write it."""
    if working:
        nums = [n for n in (share_parts(s)[1] for s in item.shares) if n is not None]
        if len(nums) == len(item.shares) > 1 and str(sum(map(int, nums))) == item.answer:
            return " + ".join(nums) + f" = {item.answer}.\n" + target_text(item.answer)
    return target_text(item.answer)


def _ids(
    tok: PreTrainedTokenizerBase, msgs: list[dict], target: str, eos: bool = True
) -> tuple[list[int], list[int]]:
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    p = tok(text, add_special_tokens=False)["input_ids"]
    c = tok(target + (tok.eos_token if eos else ""), add_special_tokens=False)["input_ids"]
    return p + c, [IGNORE] * len(p) + c


def _left_pad(seqs, pad: int):
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


def _token_logp(lm: LatentModel, seqs, state):
    """Per-token log-probs (B, T-1) of the labels and the label mask, after `state`."""
    ids, mask, labels = _left_pad(seqs, int(lm.tokenizer.pad_token_id))
    hidden, _ = lm.forward_embeds(lm.embed(ids.to(lm.device)), mask.to(lm.device), state)
    logits = lm.logits(hidden)[:, :-1]
    lab = labels[:, 1:].to(logits.device)
    keep = lab != IGNORE
    logp = logits.log_softmax(-1).gather(-1, lab.clamp(min=0)[..., None])[..., 0]
    return logp, keep


def sft_loss(lm: LatentModel, seqs, state=None) -> torch.Tensor:
    logp, keep = _token_logp(lm, seqs, state)
    return -(logp * keep).sum() / keep.sum()


def latent_state(
    lm: LatentModel,
    items,
    k: int,
    thoughts: str = "real",
    memory: WorkingMemory | None = None,
    edge: str = "latent",
):
    """The answerer's messages and the state it reads (thoughts KV only; `edge="kv"`: each holder's
    prompt and thoughts), with gradients."""
    cfg = RunConfig(prompts=PROMPT_SET, latent_steps=k, threads=None, thoughts=thoughts)
    g = agents.handoff_graph(len(items[0].shares), edge)
    mem = memory if memory is not None else WorkingMemory(lm, grad=True)
    questions, shares = [it.question for it in items], [it.shares for it in items]
    return agents.final_agent_view(g, lm, questions, cfg, mem, shares=shares)


def thought_note_loss(lm: LatentModel, mem: WorkingMemory, items, relevance: bool = False) -> torch.Tensor:
    """Cross-entropy of each holder's thoughts, read through the output head, against its note's first k
    tokens: thought j stands where note token j would (Coconut-style replacement of the text hand-off)."""
    latents = [s for s in mem.segments if s.kind == "latent"]
    losses = []
    for i, seg in enumerate(latents):
        target = note_targets(lm, items, i, seg.hidden.shape[1], relevance)
        logits = lm.logits(seg.hidden)
        flat = target.reshape(-1).to(logits.device)
        losses.append(
            nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat, ignore_index=IGNORE)
        )
    return torch.stack(losses).mean()


def note_targets(lm: LatentModel, items, holder: int, k: int, relevance: bool = False) -> torch.Tensor:
    """Token ids (B, k) of the first k tokens of holder `holder`'s note (`holder_note`), IGNORE past the
    note's end."""
    target = torch.full((len(items), k), IGNORE, dtype=torch.long)
    for r, it in enumerate(items):
        note = holder_note(it.shares[holder], it.question, relevance)
        ids = lm.tokenizer(note, add_special_tokens=False)["input_ids"][:k]
        target[r, : len(ids)] = torch.tensor(ids)
    return target


class NoteThoughts:
    """An aligner for the thinking loop that returns, at holder i's thought j, the input embedding of
    note token j (where the note has one; the model's own realigned thought elsewhere). Holders think in
    graph order, k steps each, so the calls are counted off in that order."""

    def __init__(self, lm: LatentModel, items, k: int, relevance: bool = False) -> None:
        self.base = lm.aligner
        self.k = k
        targets = [note_targets(lm, items, i, k, relevance) for i in range(len(items[0].shares))]
        emb = lm.model.get_input_embeddings()
        self.embeds = [emb(t.clamp(min=0).to(lm.device)).detach() for t in targets]  # (B, k, D) per holder
        self.known = [(t != IGNORE).to(lm.device) for t in targets]  # (B, k)
        self.calls = 0

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        holder, j = divmod(self.calls, self.k)
        if holder >= len(self.embeds):
            raise RuntimeError(
                f"NoteThoughts serves {len(self.embeds)} holders x {self.k} thoughts; called again."
            )
        self.calls += 1
        own = self.base(hidden)
        tok = self.embeds[holder][:, j].to(own.dtype)
        return torch.where(self.known[holder][:, j, None], tok, own)


def token_thought_state(lm: LatentModel, items, k: int, memory: WorkingMemory, relevance: bool = False):
    """`latent_state` with the note tokens' input embeddings fed where the thoughts go (`NoteThoughts`;
    with `relevance`, the notes of `holder_note(.., relevance=True)`)."""
    from latent.model import LatentModel as _LM

    was_training = lm.model.training
    teacher = _LM(lm.model, lm.tokenizer, realign=NoteThoughts(lm, items, k, relevance))
    lm.model.train(was_training)  # the constructor puts the shared network in eval mode
    return latent_state(teacher, items, k, memory=memory)


def thought_embed_loss(lm: LatentModel, mem: WorkingMemory, items, relevance: bool = False) -> torch.Tensor:
    """Relative squared distance of each realigned thought j (the aligner applied to the hidden state that
    thought j comes from: the input fed at thought j) to the input embedding of the note token j it stands
    for (the same notes as `thought_note_loss`); reaches the aligner and, through the hidden states, the
    LoRA."""
    emb = lm.model.get_input_embeddings()
    losses = []
    for i, seg in enumerate(s for s in mem.segments if s.kind == "latent"):
        target = note_targets(lm, items, i, seg.hidden.shape[1], relevance).to(lm.device)  # (B, k)
        known = target != IGNORE
        want = emb(target.clamp(min=0)).detach().float()  # (B, k, D)
        d = (lm.aligner(seg.hidden).float() - want).pow(2).sum(-1) / want.pow(2).sum(-1).clamp_min(1e-6)
        losses.append((d * known).sum() / known.sum().clamp_min(1))
    return torch.stack(losses).mean()


def digit_ce(lm: LatentModel, seqs, logp: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the answer's digit tokens only (the part that must come from the shares)."""
    _, _, labels = _left_pad(seqs, int(lm.tokenizer.pad_token_id))
    lab = labels[:, 1:]
    digit = torch.tensor(
        [[int(t) != IGNORE and lm.tokenizer.decode([int(t)]).strip().isdigit() for t in row] for row in lab]
    ).to(logp.device)
    sel = digit & keep
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
    """Answer cross-entropy after k thoughts per holder, plus the configured terms. `token_thoughts`:
    the note tokens' embeddings stand where the thoughts go (`token_thought_state`, latent edges); its CE
    is logged as `token_ce`; the note and embed terms then train the writer and the aligner on the holder's
    hidden states under the note tokens (teacher forcing), where the model's own thoughts would come from.
    On kv edges the random-thought part of the anti-shortcut term is skipped: the holder's prompt, which
    the answerer then reads too, still holds the share, so the gold answer must not be pushed down there."""
    mem = WorkingMemory(lm, grad=True)
    if token_thoughts:
        msgs, state = token_thought_state(lm, items, k, mem, relevance)
    else:
        msgs, state = latent_state(lm, items, k, memory=mem, edge=edge)
    targets = [answer_target(it, working) for it in items]
    seqs = [_ids(lm.tokenizer, m, t) for m, t in zip(msgs, targets)]
    logp, keep = _token_logp(lm, seqs, state.copy())
    ce = -(logp * keep).sum() / keep.sum()
    name = "token" if token_thoughts else "latent"
    parts = {
        f"{name}_ce": float(ce.detach()),
        f"{name}_ce_digits": float(digit_ce(lm, seqs, logp, keep).detach()),
    }
    loss = ce
    if embed_weight > 0:
        emb_loss = thought_embed_loss(lm, mem, items, relevance)
        parts["embed"] = float(emb_loss.detach())
        loss = loss + embed_weight * emb_loss
    if note_weight > 0:
        note = thought_note_loss(lm, mem, items, relevance)
        parts["note"] = float(note.detach())
        loss = loss + note_weight * note
    if anti_weight > 0:
        # with working, only the operands the answerer copies from the thoughts ("23 + 14") are pushed
        # down: the rest of the line follows from them, whichever thoughts were read
        anti_seqs = [
            _ids(lm.tokenizer, m, t.split(" =")[0], eos=False) if " = " in t else s
            for m, s, t in zip(msgs, seqs, targets)
        ]
        anti = []
        states = [state.select_rows(derangement(len(items), seed))]
        if with_random and edge == "latent":
            states.append(latent_state(lm, items, k, thoughts="random")[1])
        for st in states:
            lp, kp = _token_logp(lm, anti_seqs, st)
            p_gold = (lp * kp).sum(1).div(kp.sum(1)).exp()  # geometric-mean token prob of the gold answer
            anti.append(-torch.log1p(-p_gold.clamp(max=1 - 1e-4)).mean())
        a = torch.stack(anti).mean()
        parts["anti"] = float(a.detach())
        loss = loss + anti_weight * a
    return loss, parts


def text_seqs(
    tok: PreTrainedTokenizerBase,
    prompts: PromptSet,
    items,
    rng: random.Random,
    working: bool = False,
    relevance: bool = False,
):
    """Text hand-off samples: holder -> its share as a note, or answerer reading the notes -> answer."""
    seqs = []
    for it in items:
        if rng.random() < 0.5:
            i = rng.randrange(len(it.shares))
            msgs = prompts.messages("holder", it.question, share=it.shares[i])
            seqs.append(_ids(tok, msgs, holder_note(it.shares[i], it.question, relevance)))
        else:
            ctx = [(f"holder_{i}", holder_note(s, it.question, relevance)) for i, s in enumerate(it.shares)]
            seqs.append(_ids(tok, prompts.messages("answerer", it.question, ctx), answer_target(it, working)))
    return seqs


def oracle_seqs(tok: PreTrainedTokenizerBase, prompts: PromptSet, items, working: bool = False):
    return [
        _ids(tok, prompts.messages("answerer", th.oracle_question(it)), answer_target(it, working))
        for it in items
    ]


_CONSONANTS, _VOWELS = "bdfghjklmnprstvwz", "aeiou"


def made_up_name(rng: random.Random) -> str:
    """A pronounceable name of 1-3 syllables that is not a test-split name and shares no substring
    relation with one ("Zoey" is refused as well as "Zoe")."""
    tests = [n.lower() for n in th.TEST_NAMES]
    while True:
        syl = [rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.choice((1, 2, 2, 3)))]
        name = "".join(syl) + (rng.choice(_CONSONANTS) if rng.random() < 0.4 else "")
        low = name.lower()
        if len(name) >= 3 and not any(t in low or low in t for t in tests):
            return name.capitalize()


def train_items(cfg: HandoffTrainConfig, level: str, step: int) -> list[th.HandoffItem]:
    """The hand-off items of training step `step`: the generator's train split and, with
    `random_names`, that share of them with each person renamed (the same made-up name in shares and
    question). Seeded by step alone, so the items a run trained on can be recounted."""
    import re

    items = th.make_items(level, cfg.batch_size, "train", seed=cfg.seed * 100003 + step)
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
            new = made_up_name(rng)
            while new in names.values():  # two people never share a made-up name
                new = made_up_name(rng)
            names[n] = new

        def sub(text: str, names=names) -> str:
            return pattern.sub(lambda m: names[m.group(1)], text)

        out.append(th.HandoffItem(it.id, [sub(x) for x in it.shares], sub(it.question), it.answer))
    return out


def arith_stream(cfg: HandoffTrainConfig) -> list:
    """The solver SFT problems of a run: signature-disjoint from the evaluated arith problems and, with
    `arith_skip_test_sums`, free of any line that adds two of the hand-off test split's sum values (so no
    sum test item's working line is ever a training line)."""
    from eval.arith_data import signature_disjoint_train, solution_signature

    n = cfg.steps * cfg.batch_size
    if cfg.arith_frac <= 0:
        return []
    if not cfg.arith_skip_test_sums:
        return signature_disjoint_train(n, cfg.seed)
    test = set(th.values("test", 10, 49))
    pool = signature_disjoint_train(2 * n + 64, cfg.seed)
    keep = [
        p
        for p in pool
        if not any(op == "+" and a in test and b in test for a, op, b, _ in solution_signature(p))
    ]
    return keep[:n]


def prepare(cfg: HandoffTrainConfig, lm: LatentModel):
    """Trainable model: every weight, or LoRA (peft) + a trainable linear aligner on a frozen base."""
    from latent.model import LatentModel
    from latent.realign import TrainableAligner

    if not cfg.lora:
        for p in lm.model.parameters():
            p.requires_grad_(True)
        return lm, [{"params": [p for p in lm.model.parameters()], "lr": cfg.lr}]
    from peft import LoraConfig, get_peft_model

    for p in lm.model.parameters():
        p.requires_grad_(False)
    torch.manual_seed(cfg.seed)
    aligner = TrainableAligner.from_model(lm, kind=cfg.aligner)
    net = get_peft_model(
        lm.model,
        LoraConfig(
            r=cfg.lora_r,
            lora_alpha=2 * cfg.lora_r,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            lora_dropout=0.0,
        ),
    )
    out = LatentModel(net, lm.tokenizer, realign=aligner)
    groups = [
        {"params": [p for p in net.parameters() if p.requires_grad], "lr": cfg.lr},
        {"params": list(aligner.parameters()), "lr": cfg.aligner_lr},
    ]
    return out, groups


def save_model(lm: LatentModel, out: str | Path) -> None:
    """Weights + tokenizer (full fine-tune) or the LoRA adapter + aligner, loadable by `load_model`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lm.model.save_pretrained(out)
    lm.tokenizer.save_pretrained(out)
    al = lm.aligner
    if hasattr(al, "save") and isinstance(al, nn.Module):
        al.save(out / "aligner.safetensors")


def train(
    cfg: HandoffTrainConfig, lm: LatentModel, save_to: str | Path | None = None
) -> tuple[object, list[dict], float]:
    """The training loop (AdamW, warmup + cosine); returns the trained model, the log and wall seconds."""
    from eval.arith_data import to_messages

    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    lm, groups = prepare(cfg, lm)
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    base_lrs = [g["lr"] for g in groups]
    prompts = PromptSet.load(PROMPT_SET)
    tok = lm.tokenizer
    arith = arith_stream(cfg)
    log, t0, kinds, n_latent = [], time.perf_counter(), {}, 0
    lm.model.train()
    for step in range(cfg.steps):
        prog = step / cfg.steps
        warm = min(1.0, (step + 1) / 20)
        for g, lr in zip(opt.param_groups, base_lrs):
            g["lr"] = lr * warm * 0.5 * (1 + math.cos(math.pi * prog))
        text_p = max(cfg.text_floor, 1 - (1 - cfg.text_floor) * prog / max(cfg.text_until, 1e-9))
        level = cfg.levels[step % len(cfg.levels)]
        items = train_items(cfg, level, step)
        working, relevance = level in cfg.working_levels, cfg.relevance_notes
        u = rng.random()
        if arith and u < cfg.arith_frac:
            kind = "arith"
            ps = arith[step * cfg.batch_size : (step + 1) * cfg.batch_size]
            loss = sft_loss(lm, [_ids(tok, to_messages(p), p.solution) for p in ps])
            parts = {}
        elif u < cfg.arith_frac + (1 - cfg.arith_frac) * text_p:
            kind, parts = "text", {}
            loss = sft_loss(lm, text_seqs(tok, prompts, items, rng, working, relevance))
        elif u < cfg.arith_frac + (1 - cfg.arith_frac) * (text_p + cfg.oracle_frac):
            kind, parts = "oracle", {}
            loss = sft_loss(lm, oracle_seqs(tok, prompts, items, working))
        else:
            n_latent += 1
            with_random = n_latent % cfg.anti_random_every == 0
            edge = "kv" if cfg.kv_frac > 0 and rng.random() < cfg.kv_frac else "latent"
            tok_p = cfg.token_thought_frac * max(0.0, 1 - prog / max(cfg.token_thought_until, 1e-9))
            token_thoughts = edge == "latent" and tok_p > 0 and rng.random() < tok_p
            kind = "token" if token_thoughts else ("latent_kv" if edge == "kv" else "latent")
            loss, parts = latent_loss(
                lm, items, cfg.k_at(prog), cfg.anti_weight, cfg.seed + step, with_random, cfg.note_weight,
                embed_weight=cfg.embed_weight, token_thoughts=token_thoughts, edge=edge, working=working,
                relevance=relevance,
            )  # fmt: skip
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
        opt.step()
        if not cfg.lora and (step + 1) % cfg.realign_every == 0:
            lm.refresh_aligner()  # the ridge map `load_model` derives from the embeddings, kept current
        kinds.setdefault(kind, []).append(float(loss.detach()))
        if save_to is not None and (step + 1) % cfg.save_every == 0:
            save_model(lm, save_to)
        if (step + 1) % cfg.log_every == 0:
            entry = {"step": step + 1, "s": round(time.perf_counter() - t0, 1), "k": cfg.k_at(prog)}
            entry |= {f"loss_{k}": round(sum(v) / len(v), 4) for k, v in kinds.items()}
            log.append(entry | {k: round(v, 4) for k, v in parts.items()})
            logger.info(json.dumps(log[-1]))
            print(json.dumps(log[-1]), flush=True)
            kinds = {}
        if cfg.max_minutes and time.perf_counter() - t0 > 60 * cfg.max_minutes:
            logger.info("time budget reached at step %d", step + 1)
            break
    lm.model.eval()
    return lm, log, time.perf_counter() - t0


def save_config(cfg: HandoffTrainConfig, out: Path, log: list[dict], wall: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "handoff_train.json").write_text(
        json.dumps({"config": asdict(cfg), "log": log, "wall_s": wall}, indent=2)
    )


def freeze_grads(model: nn.Module) -> None:
    for p in model.parameters():
        p.requires_grad_(False)
