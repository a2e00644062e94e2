"""The thought-channel trainer's bridge mode: latent hand-off across two models (`--sender S --base R`).

The holders run the sender S and the answerer the receiver R (the base); both stay frozen (R may train a
LoRA with `trainable: lora`). What trains is a `latent.bridge.Bridge`, a map from S's realigned thoughts
into R's input space, through the inference path: `agents.final_agent_view` on a hand-off graph whose
`latent` edges read through the bridge, over a `WorkingMemory(grad=True)`, so the answer's cross-entropy
reaches the bridge through every bridged thought. The answerer reads the question only: its messages are
built without any share, as `agents.run` builds them. Terms: the answer, the anti-shortcut (the gold
answer pushed down under another item's or random thoughts, as in the one-model channel) and, with
`embed_weight`, bridged thought j pulled toward R's embedding of note token j.

The loop, schedule, budget, resume and card are `finetune.thought_channel`'s; this module holds what
differs: the two models, the loss, and saving the bridge under `name` (with R's LoRA, if trained, under
`<name>-receiver`, which the bridge names as its receiver).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eval import tasks_handoff as th

if TYPE_CHECKING:
    from eval.tasks_handoff_rows import Pair
    from latent import LatentModel
    from latent.bridge import Bridge
    from latent.memory import WorkingMemory

RECEIVER_SUFFIX = "-receiver"  # where a receiver LoRA trained with the bridge is saved: <name>-receiver


def setup(cfg: Any, receiver: LatentModel) -> tuple[LatentModel, Bridge]:
    """The frozen sender and a bridge from it into `receiver`, initialised over their shared tokens."""
    from latent import load_model
    from latent.bridge import Bridge

    sender = load_model(cfg.sender, device=receiver.device)
    for p in sender.model.parameters():
        p.requires_grad_(False)
    torch.manual_seed(cfg.seed)
    mlp = receiver.hidden_size if cfg.bridge == "mlp" else 0
    return sender, Bridge.from_models(sender, receiver, cfg.sender, cfg.base, cfg.bridge, mlp)


def bridge_state(
    lm: LatentModel,
    sender: LatentModel,
    bridge: Bridge,
    items: list[th.HandoffItem],
    k: int,
    thoughts: str = "real",
    memory: WorkingMemory | None = None,
):
    """The answerer's messages (the question only) and the state it reads: k sender thoughts per holder,
    read through the bridge, with gradients."""
    import agents
    from agents.handoff import PROMPT_SET
    from eval.tasks_handoff_rows import BRIDGE, SENDER
    from latent.memory import WorkingMemory

    run = agents.RunConfig(prompts=PROMPT_SET, latent_steps=k, threads=None, thoughts=thoughts)
    g = agents.handoff_graph(len(items[0].shares), "latent", SENDER, BRIDGE)
    mem = memory if memory is not None else WorkingMemory(lm, grad=True)
    return agents.final_agent_view(
        g,
        {"default": lm, SENDER: sender},
        [it.question for it in items],
        run,
        mem,
        shares=[it.shares for it in items],
        bridges={BRIDGE: bridge},
    )


def bridged_embed_loss(
    lm: LatentModel, bridge: Bridge, mem: WorkingMemory, items, relevance: bool
) -> torch.Tensor:
    """Relative squared distance of each bridged thought j to the receiver's embedding of note token j."""
    from finetune.thought_channel import IGNORE, note_targets

    emb, losses = lm.model.get_input_embeddings(), []
    for i, seg in enumerate(s for s in mem.segments if s.kind == "latent"):
        target = note_targets(lm, items, i, seg.embeds.shape[1], relevance).to(lm.device)  # (B, k)
        known = target != IGNORE
        want = emb(target.clamp(min=0)).detach().float()  # (B, k, D_r)
        got = bridge(seg.embeds).float()
        d = (got - want).pow(2).sum(-1) / want.pow(2).sum(-1).clamp_min(1e-6)
        losses.append((d * known).sum() / known.sum().clamp_min(1))
    return torch.stack(losses).mean()


def bridge_loss(
    cfg: Any,
    lm: LatentModel,
    sender: LatentModel,
    bridge: Bridge,
    items,
    k: int,
    seed: int,
    with_random: bool,
    working: bool = False,
) -> tuple[torch.Tensor, dict]:
    """Answer cross-entropy after the bridged thoughts, plus the anti-shortcut and embedding terms."""
    from agents.latentmas import derangement
    from finetune.thought_channel import answer_target, digit_ce, ids_and_labels, token_logp
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
        value = bridged_embed_loss(lm, bridge, mem, items, cfg.relevance_notes)
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
    cfg: Any, lm: LatentModel, step: int, rng: random.Random, sender: LatentModel, bridge: Bridge
) -> tuple[str, torch.Tensor, dict]:
    """(kind, loss, parts) of step `step`: a bridged latent batch, or (receiver LoRA only) an oracle batch."""
    from finetune.thought_channel import oracle_seqs, sft_loss, train_items

    level = cfg.levels[step % len(cfg.levels)]
    items, working = train_items(cfg, level, step), level in cfg.working_levels
    if cfg.trainable == "lora" and rng.random() < cfg.oracle_frac:
        return "oracle", sft_loss(lm, oracle_seqs(lm.tokenizer, items, working)), {}
    with_random = step % cfg.anti_random_every == 0
    k, seed = cfg.thoughts_at(step), cfg.seed + step
    loss, parts = bridge_loss(cfg, lm, sender, bridge, items, k, seed, with_random, working)
    return "bridge", loss, parts


def save(cfg: Any, lm: LatentModel, bridge: Bridge) -> Path:
    """Save the bridge under `cfg.export_path` (and a trained receiver LoRA as `<name>-receiver`, which the
    bridge then names as its receiver); the previous copy stays whole until the new one is in place."""
    from finetune.thought_channel import save_model
    from latent.catalogue import cache_dir

    out = Path(cfg.export_path)
    if any(p.requires_grad for p in lm.model.parameters()):
        receiver = save_model(lm, out.with_name(out.name + RECEIVER_SUFFIX), cfg.base)
        in_cache = out.parent.resolve() == (cache_dir() / "models").resolve()
        bridge.receiver = receiver.name if in_cache else str(receiver.resolve())  # a name where names resolve
    tmp, old = out.with_name(out.name + ".partial"), out.with_name(out.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    bridge.save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def load_trained(cfg: Any) -> tuple[LatentModel, Pair]:
    """(receiver, Pair) of a saved bridge, each model loaded by the name the bridge records."""
    from eval.tasks_handoff_rows import Pair
    from latent import load_model
    from latent.bridge import Bridge

    bridge = Bridge.from_pretrained(str(cfg.export_path))
    receiver = load_model(bridge.receiver)
    return receiver, Pair(load_model(bridge.sender, device=receiver.device), bridge.to(receiver.device))
