"""The thought-channel trainer's bridge mode: latent hand-off across two models (`--sender S --base R`).

The holders run the sender S and the answerer the receiver R (the base); both stay frozen (R may train a
LoRA with `trainable: lora`). What trains is a `latent.bridge.Bridge`, a map from S's realigned thoughts
into R's input space, through the inference path: `agents.final_agent_view` on a hand-off graph whose
`latent` edges read through the bridge, over a `WorkingMemory(grad=True)`, so the answer's cross-entropy
reaches the bridge through every bridged thought. The answerer reads the question only: its messages are
built without any share, as `agents.run` builds them. Terms: the answer, the anti-shortcut (the gold
answer pushed down under another item's or random thoughts, as in the one-model channel) and, with
`embed_weight`, bridged thought j pulled toward R's embedding of note token j.

The loop, schedule, budget, resume, card and the loss (`bridge_loss`, built from the one-model channel's
pieces) are `finetune.thought_channel`'s; this module holds what the bridge adds: the two models, the
answerer's view through the bridge, the embedding term, and saving the bridge under `name` (with R's
LoRA, if trained, under `<name>-receiver`, which the bridge names as its receiver). It imports nothing
from the trainer, so the trainer and the report can both import it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eval.tasks import handoff as th

if TYPE_CHECKING:
    from eval.tasks.handoff_rows import Pair
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
    from eval.tasks.handoff_rows import BRIDGE, SENDER
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
    lm: LatentModel, bridge: Bridge, mem: WorkingMemory, targets: list[torch.Tensor], ignore: int = -100
) -> torch.Tensor:
    """Relative squared distance of each bridged thought j to the receiver's embedding of note token j;
    `targets`: per holder, the note's receiver token ids (B, k), `ignore` past the note's end."""
    emb, losses = lm.model.get_input_embeddings(), []
    for seg, target in zip((s for s in mem.segments if s.kind == "latent"), targets, strict=True):
        target = target.to(lm.device)
        known = target != ignore
        want = emb(target.clamp(min=0)).detach().float()  # (B, k, D_r)
        got = bridge(seg.embeds).float()
        d = (got - want).pow(2).sum(-1) / want.pow(2).sum(-1).clamp_min(1e-6)
        losses.append((d * known).sum() / known.sum().clamp_min(1))
    return torch.stack(losses).mean()


def receiver_path(cfg: Any) -> Path:
    """Where a receiver LoRA trained with the bridge is saved: `<name>-receiver` beside the bridge."""
    out = Path(cfg.export_path)
    return out.with_name(out.name + RECEIVER_SUFFIX)


def save(cfg: Any, bridge: Bridge, receiver: Path | None = None) -> Path:
    """Save the bridge under `cfg.export_path`, naming `receiver` (a receiver LoRA saved with it) as its
    receiver when given; the previous copy stays whole until the new one is in place."""
    from latent.catalogue import cache_dir

    out = Path(cfg.export_path)
    if receiver is not None:
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
    from eval.tasks.handoff_rows import Pair
    from latent import load_model
    from latent.bridge import Bridge

    bridge = Bridge.from_pretrained(str(cfg.export_path))
    receiver = load_model(bridge.receiver)
    return receiver, Pair(load_model(bridge.sender, device=receiver.device), bridge.to(receiver.device))
