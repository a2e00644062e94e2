"""Train a built-in model (e.g. `builtin:arith-mini`) from scratch on two CPU cores: pretraining, then SFT.

The recipe, top to bottom:
1. train a small byte-level BPE chat tokenizer on the *train* split (``latent.tokenizer``);
2. build a Llama-style ``LlamaForCausalLM`` (fp32, seeded);
3. **pretraining**: packed plain-text documents (word problem + worked solution, and bare solution
   "drills" that practise the arithmetic densely), loss on every token, with a curriculum from
   1-2 step problems to 1-4 step problems;
4. **SFT**: packed ChatML samples for every role in ``ROLE_SYSTEM_PROMPTS``, with and without a hint
   or a (sometimes wrong) draft from a previous agent, loss on the assistant turn only;
5. greedy batched evaluation on held-out templates, then ``save_pretrained`` (safetensors) plus the
   tokenizer, generation config, ``card.json``, ``README.md`` and ``loss_curve.png``.

The learning-rate schedule (warmup + cosine), the pretrain/SFT switch and the curriculum all follow
one ``progress`` value in [0, 1]: ``step / max_steps``, or, with ``max_minutes``, whichever of that and
the elapsed fraction of the time budget is larger, so a budgeted run on a shared CPU still anneals
and stops by itself. Checkpoints (model, optimizer, step, elapsed time, loss log) are written every
``ckpt_minutes`` and ``--resume`` continues from them; batch ``i`` is generated from ``(seed, i)``, so
a resumed run sees the same data it would have seen.

Run: ``latentworks finetune builtin --config finetune/recipes/arith-mini-v3.yaml`` (or
``python -m finetune.train_builtin --config ...``)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from eval.tasks.arith_data import (
    CONTEXT_KINDS,
    ROLE_SYSTEM_PROMPTS,
    ArithProblem,
    extract_boxed_int,
    make_context,
    make_problems,
    to_messages,
)
from finetune.model_card import LOSS_CURVE, card_markdown, write_model_card

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100


@dataclass
class BuiltinConfig:
    """Every setting of the built-in model recipe; the YAML presets and CLI flags fill this dataclass."""

    # Parameters that name the run and its outputs
    name: str = field(default="arith-mini", metadata={"help": "Model name (builtin:<name>)."})
    out_dir: str = field(
        default="runs/arith-mini", metadata={"help": "Checkpoints, logs and the final model."}
    )
    export_dir: str | None = field(
        default=None,
        metadata={
            "help": "If set, copy the final model directory here (e.g. latent/builtin_models/arith-mini)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seeds the tokenizer corpus, weights and data stream."})
    threads: int = field(
        default=2, metadata={"help": "torch.set_num_threads; 1 is faster on an oversubscribed CPU."}
    )

    # Parameters of the model (Hugging Face LlamaConfig names)
    vocab_size: int = field(
        default=768, metadata={"help": "Tokenizer vocabulary target (saturates near 690)."}
    )
    hidden_size: int = field(default=128, metadata={"help": "Width of the residual stream."})
    num_hidden_layers: int = field(default=6, metadata={"help": "Decoder layers."})
    num_attention_heads: int = field(
        default=4, metadata={"help": "Attention heads (head_dim = hidden/heads)."}
    )
    intermediate_size: int = field(default=512, metadata={"help": "SwiGLU MLP width."})
    max_position_embeddings: int = field(
        default=512, metadata={"help": "Longest sequence the RoPE is set up for."}
    )

    # Parameters of the data
    tokenizer_corpus: int = field(
        default=4000, metadata={"help": "Train-split samples used to fit the tokenizer."}
    )
    seq_len: int = field(default=256, metadata={"help": "Length of one packed row."})
    batch_size: int = field(default=8, metadata={"help": "Packed rows per step."})
    pretrain_frac: float = field(default=0.6, metadata={"help": "Share of progress spent in pretraining."})
    drill_frac: float = field(
        default=0.35, metadata={"help": "Share of pretraining documents that are bare solutions."}
    )
    context_frac: float = field(
        default=0.4, metadata={"help": "Share of SFT samples with a hint/draft in the user turn."}
    )
    curriculum_frac: float = field(
        default=0.1, metadata={"help": "Progress until which only 1-2 step problems are used."}
    )

    # Parameters of the optimisation
    lr: float = field(default=2e-3, metadata={"help": "Peak AdamW learning rate."})
    min_lr_ratio: float = field(
        default=0.05, metadata={"help": "Final LR as a fraction of the peak (cosine)."}
    )
    warmup_steps: int = field(default=100, metadata={"help": "Linear warmup steps."})
    weight_decay: float = field(default=0.05, metadata={"help": "AdamW weight decay on matrices only."})
    grad_clip: float = field(default=1.0, metadata={"help": "Global gradient-norm clip."})
    max_steps: int = field(default=20000, metadata={"help": "Step budget (progress = step / max_steps)."})
    max_minutes: float | None = field(
        default=None, metadata={"help": "Training time budget in minutes (optional)."}
    )

    # Parameters of evaluation and checkpointing
    ckpt_minutes: float = field(default=5.0, metadata={"help": "Write a resumable checkpoint this often."})
    ckpt_every_steps: int = field(default=0, metadata={"help": "Also checkpoint every N steps (0 = off)."})
    log_every: int = field(default=20, metadata={"help": "Steps between loss-log entries."})
    val_n: int = field(
        default=96, metadata={"help": "Held-out validation problems scored at each checkpoint."}
    )
    val_seed: int = field(
        default=777, metadata={"help": "Seed of the validation problems (picks the best checkpoint)."}
    )
    eval_n: int = field(default=256, metadata={"help": "Final held-out test problems per step count."})
    eval_seed: int = field(default=2024, metadata={"help": "Seed of the final held-out test problems."})
    eval_steps: list[int] = field(
        default_factory=lambda: [2, 3], metadata={"help": "Step counts in the headline accuracy."}
    )
    extra_eval_steps: list[int] = field(
        default_factory=lambda: [1, 4], metadata={"help": "Also reported, not in the headline."}
    )
    eval_batch_size: int = field(default=64, metadata={"help": "Batch size of greedy generation."})

    def __post_init__(self) -> None:
        problems = []
        if self.hidden_size % self.num_attention_heads:
            problems.append("`hidden_size` must be divisible by `num_attention_heads`")
        for name in (
            "hidden_size",
            "num_hidden_layers",
            "intermediate_size",
            "seq_len",
            "batch_size",
            "max_steps",
        ):
            if getattr(self, name) <= 0:
                problems.append(f"`{name}` must be > 0")
        for name in ("pretrain_frac", "drill_frac", "context_frac", "curriculum_frac", "min_lr_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"`{name}` must be in [0, 1]")
        if self.lr <= 0:
            problems.append("`lr` must be > 0")
        if self.max_minutes is not None and self.max_minutes <= 0:
            problems.append("`max_minutes` must be > 0 or None")
        if self.seq_len > self.max_position_embeddings:
            problems.append("`seq_len` must be <= `max_position_embeddings`")
        if problems:
            raise ValueError("Invalid BuiltinConfig: " + "; ".join(problems) + ".")


# ----------------------------------------------------------------------------- config plumbing


def load_config(path: str | os.PathLike | None = None, **overrides: Any) -> BuiltinConfig:
    """Build a config from a YAML preset (optional) and keyword overrides; unknown keys are an error."""
    from latent.args import config_from_file

    return config_from_file(BuiltinConfig, path, **overrides)


@dataclass
class BuiltinOptions:
    """How `latentworks finetune builtin` runs the recipe (not part of the recipe itself)."""

    resume: bool = field(
        default=False,
        metadata={"help": "Continue from <out_dir>/ckpt/state.pt if it exists.", "switch": True},
    )
    tiny: bool = field(
        default=False,
        metadata={"help": "A seconds-long miniature run (tests, smoke checks).", "switch": True},
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per BuiltinConfig field (the shared builder), plus --config, --set, --resume, --tiny."""
    from latent.args import add_config_arguments

    add_config_arguments(parser, BuiltinConfig)
    add_config_arguments(parser, BuiltinOptions, files=False)


TINY_OVERRIDES: dict[str, Any] = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, tokenizer_corpus=300,
    seq_len=128, batch_size=4, max_steps=30, warmup_steps=5, lr=3e-3, val_n=8, eval_n=4, eval_batch_size=8,
    extra_eval_steps=[], log_every=5,
)  # fmt: skip


# ----------------------------------------------------------------------------- tokenizer and model


def build_tokenizer(cfg: BuiltinConfig):
    """Fit the chat tokenizer on rendered train-split samples only (held-out wording stays unseen)."""
    from latent.tokenizer import CHAT_TEMPLATE, train_chat_tokenizer

    rng = random.Random(f"tok|{cfg.seed}")
    roles = sorted(ROLE_SYSTEM_PROMPTS)
    texts = []
    for p in make_problems(cfg.tokenizer_corpus, seed=cfg.seed + 10_000, split="train", steps=(1, 2, 3, 4)):
        ctx = make_context(p, rng.choice(CONTEXT_KINDS), rng) if rng.random() < 0.5 else None
        msgs = to_messages(p, rng.choice(roles), ctx) + [{"role": "assistant", "content": p.solution}]
        texts.append(_render_chatml(msgs))
    tok = train_chat_tokenizer(texts, vocab_size=cfg.vocab_size)
    assert tok.chat_template == CHAT_TEMPLATE
    return tok


def _render_chatml(messages: list[dict]) -> str:
    # Same text as CHAT_TEMPLATE renders; used before a tokenizer exists.
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


# BuiltinConfig fields that are LlamaConfig fields of the same name (the "Parameters of the model" block)
LLAMA_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
)


def build_model(cfg: BuiltinConfig, tok: PreTrainedTokenizerBase) -> torch.nn.Module:
    """A Llama-style decoder sized by ``cfg``, tied embeddings (saves vocab x hidden parameters)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    mcfg = LlamaConfig(
        **{name: getattr(cfg, name) for name in LLAMA_FIELDS},
        vocab_size=len(tok),
        num_key_value_heads=cfg.num_attention_heads,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(mcfg)


# ----------------------------------------------------------------------------- data


def _steps_for(progress: float, cfg: BuiltinConfig) -> tuple[int, ...]:
    # Curriculum: short problems first; afterwards mostly 2-3 steps (the headline), some 1 and 4.
    if progress < cfg.curriculum_frac:
        return (1, 2, 1, 2, 3)
    return (1, 2, 2, 3, 3, 3, 4, 2, 3, 4)


def encode_sft(
    tok: PreTrainedTokenizerBase, problem: ArithProblem, role: str, context: str | None
) -> tuple[list[int], list[int]]:
    """Token ids and labels of one chat sample; labels are IGNORE_INDEX outside the assistant turn.

    Prompt and completion are tokenized separately, exactly as generation sees them (the prompt ends
    with ``<|im_start|>assistant\\n``, where a pre-tokenizer boundary lies anyway).
    """
    prompt = tok.apply_chat_template(
        to_messages(problem, role, context), tokenize=False, add_generation_prompt=True
    )
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tok(problem.solution + tok.eos_token, add_special_tokens=False)["input_ids"]
    nl = tok("\n", add_special_tokens=False)["input_ids"]
    return p_ids + c_ids + nl, [IGNORE_INDEX] * len(p_ids) + c_ids + [IGNORE_INDEX] * len(nl)


def encode_pretrain(
    tok: PreTrainedTokenizerBase, problem: ArithProblem, drill: bool
) -> tuple[list[int], list[int]]:
    """A plain-text document (question + solution, or the bare solution), loss on every token."""
    text = (problem.solution if drill else problem.question + "\n" + problem.solution) + tok.eos_token + "\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids, list(ids)


def make_batch(
    tok: PreTrainedTokenizerBase, cfg: BuiltinConfig, step: int, progress: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack whole documents into ``batch_size`` rows of ``seq_len`` tokens (no document is split).

    Documents in a row attend to earlier ones (no block mask); each row starts at a document start, and
    the padded tail carries no loss. Deterministic in ``(cfg.seed, step)`` for exact resumption.
    """
    rng = random.Random(f"batch|{cfg.seed}|{step}")
    pretrain = progress < cfg.pretrain_frac
    roles = sorted(ROLE_SYSTEM_PROMPTS)
    ids = torch.full((cfg.batch_size, cfg.seq_len), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((cfg.batch_size, cfg.seq_len), IGNORE_INDEX, dtype=torch.long)
    used = [0] * cfg.batch_size  # tokens filled per row
    chunk, misses = 0, 0
    # First-fit packing: each document goes into the first row with room; stop after a run of misses.
    while misses < 16:
        problems = make_problems(
            32, seed=cfg.seed * 1_000_003 + step * 1000 + chunk, steps=_steps_for(progress, cfg)
        )
        chunk += 1
        for p in problems:
            if pretrain:
                x, y = encode_pretrain(tok, p, drill=rng.random() < cfg.drill_frac)
            else:
                ctx = (
                    make_context(p, rng.choice(CONTEXT_KINDS), rng)
                    if rng.random() < cfg.context_frac
                    else None
                )
                x, y = encode_sft(tok, p, rng.choice(roles), ctx)
            row = next((r for r in range(cfg.batch_size) if used[r] + len(x) <= cfg.seq_len), None)
            if row is None:
                misses += 1
                if misses >= 16:
                    break
                continue
            col = used[row]
            ids[row, col : col + len(x)] = torch.tensor(x)
            labels[row, col : col + len(y)] = torch.tensor(y)
            used[row] += len(x)
    return ids, labels


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def generate_solutions(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    problems: list[ArithProblem],
    role: str = "solver",
    batch_size: int = 64,
    max_new_tokens: int | None = None,
    contexts: list[str | None] | None = None,
) -> list[str]:
    """Greedy, batched (left-padded) solutions for ``problems`` in the ``role`` chat format.

    ``contexts`` (one hint/draft or None per problem) goes into the user turn, as in ``to_messages``.
    """
    if not problems:
        return []
    if contexts is not None and len(contexts) != len(problems):
        raise ValueError(
            f"`contexts` has {len(contexts)} entries for {len(problems)} problems; pass one per problem."
        )
    contexts = contexts if contexts is not None else [None] * len(problems)
    model.eval()
    tok.padding_side = "left"
    outs: list[str] = []
    for i in range(0, len(problems), batch_size):
        chunk = problems[i : i + batch_size]
        prompts = [
            tok.apply_chat_template(to_messages(p, role, c), tokenize=False, add_generation_prompt=True)
            for p, c in zip(chunk, contexts[i : i + batch_size])
        ]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        budget = max_new_tokens or 14 * max(p.n_steps for p in chunk) + 12
        gen = model.generate(
            **enc,
            max_new_tokens=budget,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        outs += tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return outs


def accuracy_by_steps(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, problems: list[ArithProblem], batch_size: int = 64
) -> tuple[dict[int, float], list[bool]]:
    """Exact-match accuracy of the boxed integer, per step count, plus the per-problem outcomes."""
    texts = generate_solutions(model, tok, problems, batch_size=batch_size)
    ok = [extract_boxed_int(t) == p.answer for t, p in zip(texts, problems)]
    by: dict[int, list[bool]] = {}
    for p, o in zip(problems, ok):
        by.setdefault(p.n_steps, []).append(o)
    return {k: sum(v) / len(v) for k, v in sorted(by.items())}, ok


def heldout_eval_set(cfg: BuiltinConfig, steps: list[int]) -> list[ArithProblem]:
    """The fixed held-out test problems: ``eval_n`` per step count, held-out templates and seed."""
    return make_problems(cfg.eval_n * len(steps), seed=cfg.eval_seed, split="heldout", steps=tuple(steps))


# ----------------------------------------------------------------------------- training loop


def lr_at(step: int, progress: float, cfg: BuiltinConfig) -> float:
    """Linear warmup over ``warmup_steps``, then cosine from ``lr`` to ``lr * min_lr_ratio`` in progress."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def _progress(step: int, elapsed: float, cfg: BuiltinConfig) -> float:
    p = step / cfg.max_steps
    if cfg.max_minutes is not None:
        p = max(p, elapsed / (60.0 * cfg.max_minutes))
    return p


def _make_optimizer(model: torch.nn.Module, cfg: BuiltinConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def _save_state(path: Path, state: dict) -> None:
    # Write then rename, so a run killed mid-save never leaves a truncated checkpoint.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def train(cfg: BuiltinConfig, resume: bool = False, command: str | None = None) -> dict:
    """Run the whole recipe; returns the model card dict (also written to ``card.json``)."""
    model, tok, state, n_params = train_loop(cfg, resume, command)
    return finish(cfg, model, tok, state, n_params)


def train_loop(
    cfg: BuiltinConfig, resume: bool = False, command: str | None = None
) -> tuple[torch.nn.Module, Any, dict, int]:
    """Tokenizer, model and the pretrain+SFT loop up to the final checkpoint; returns (model, tok, state, n_params)."""
    from tqdm import tqdm
    from transformers import PreTrainedTokenizerFast

    torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out_dir)
    ckpt = out / "ckpt" / "state.pt"
    tok_dir = out / "tokenizer"
    if resume and ckpt.exists():
        tok = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    else:
        tok = build_tokenizer(cfg)
        tok.save_pretrained(tok_dir)
    model = build_model(cfg, tok)
    opt = _make_optimizer(model, cfg)
    n_params = sum(p.numel() for p in model.parameters())
    state: dict[str, Any] = {"step": 0, "elapsed": 0.0, "tokens": 0, "log": [], "val": [], "best_val": -1.0}
    if resume and ckpt.exists():
        saved = torch.load(ckpt, map_location="cpu", weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        state = saved["state"]
        # Checkpoints written before command logging came from the preset's own command.
        state.setdefault("commands", [_preset_command(cfg)])
        logger.info("resumed from %s at step %d (%.1f min)", ckpt, state["step"], state["elapsed"] / 60)
    elif resume:
        logger.warning("--resume given but %s does not exist; starting fresh", ckpt)
    state.setdefault("commands", [])
    if command:
        state["commands"].append(command)
    logger.info("model: %d parameters, vocab %d", n_params, len(tok))
    val_set = make_problems(cfg.val_n, seed=cfg.val_seed, split="heldout", steps=tuple(cfg.eval_steps))

    def checkpoint() -> None:
        acc, _ = accuracy_by_steps(model, tok, val_set, cfg.eval_batch_size)
        model.train()
        val = sum(acc.values()) / len(acc)
        state["val"].append(
            {"step": state["step"], "minutes": state["elapsed"] / 60, "acc": val, "by_steps": acc}
        )
        if val >= state["best_val"]:
            state["best_val"] = val
            _save_state(
                out / "ckpt" / "best.pt", {"model": model.state_dict(), "step": state["step"], "val": val}
            )
        _save_state(ckpt, {"model": model.state_dict(), "optimizer": opt.state_dict(), "state": state})
        logger.info(
            "checkpoint step %d: val acc %.3f %s (best %.3f)", state["step"], val, acc, state["best_val"]
        )

    model.train()
    t0 = time.time() - state["elapsed"]
    last_ckpt = time.time()
    bar = tqdm(desc=f"train {cfg.name}", unit="step", initial=state["step"], dynamic_ncols=True)
    run_loss, run_n, tok_mark, time_mark = 0.0, 0, state["tokens"], time.time()
    while _progress(state["step"], state["elapsed"], cfg) < 1.0:
        progress = _progress(state["step"], state["elapsed"], cfg)
        for g in opt.param_groups:
            g["lr"] = lr_at(state["step"], progress, cfg)
        ids, labels = make_batch(tok, cfg, state["step"], progress)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        state["step"] += 1
        state["tokens"] += int((ids != tok.pad_token_id).sum())
        state["elapsed"] = time.time() - t0
        run_loss, run_n = run_loss + loss.item(), run_n + 1
        bar.update(1)
        if state["step"] % cfg.log_every == 0:
            tps = (state["tokens"] - tok_mark) / max(time.time() - time_mark, 1e-9)
            stage = "pretrain" if progress < cfg.pretrain_frac else "sft"
            entry = {"step": state["step"], "loss": run_loss / run_n, "stage": stage, "tokens": state["tokens"],
                     "minutes": state["elapsed"] / 60, "lr": opt.param_groups[0]["lr"], "tok_per_s": tps}  # fmt: skip
            state["log"].append(entry)
            bar.set_postfix(
                loss=f"{entry['loss']:.3f}", stage=stage, tps=f"{tps:.0f}", prog=f"{progress:.2f}"
            )
            logger.info("step %d %s loss %.4f lr %.2e %.0f tok/s progress %.3f", state["step"], stage,
                        entry["loss"], entry["lr"], tps, progress)  # fmt: skip
            run_loss, run_n, tok_mark, time_mark = 0.0, 0, state["tokens"], time.time()
        by_steps = cfg.ckpt_every_steps > 0 and state["step"] % cfg.ckpt_every_steps == 0
        if by_steps or time.time() - last_ckpt > 60 * cfg.ckpt_minutes:
            checkpoint()
            last_ckpt = time.time()
    bar.close()
    checkpoint()
    return model, tok, state, n_params


# ----------------------------------------------------------------------------- final model + card


def finish(
    cfg: BuiltinConfig, model: PreTrainedModel, tok: PreTrainedTokenizerBase, state: dict, n_params: int
) -> dict:
    """Load the best checkpoint (by validation accuracy), test it, save it with its card."""
    import transformers
    from transformers import GenerationConfig

    best = torch.load(Path(cfg.out_dir) / "ckpt" / "best.pt", map_location="cpu", weights_only=False)
    model.load_state_dict(best["model"])
    t_eval = time.time()
    test = heldout_eval_set(cfg, cfg.eval_steps)
    acc, ok = accuracy_by_steps(model, tok, test, cfg.eval_batch_size)
    extra = {}
    if cfg.extra_eval_steps:
        extra, _ = accuracy_by_steps(
            model, tok, heldout_eval_set(cfg, cfg.extra_eval_steps), cfg.eval_batch_size
        )
    in_dist, _ = accuracy_by_steps(
        model, tok, make_problems(min(cfg.eval_n, 128) * 2, seed=cfg.eval_seed, split="train", steps=(2, 3)),
        cfg.eval_batch_size,
    )  # fmt: skip
    eval_s = time.time() - t_eval
    final = Path(cfg.out_dir) / "final"
    if final.exists():
        shutil.rmtree(final)
    model.generation_config = GenerationConfig(
        do_sample=False, max_new_tokens=96, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    model.save_pretrained(final, safe_serialization=True)
    tok.save_pretrained(final)
    size = sum(f.stat().st_size for f in final.iterdir() if f.is_file())
    card = {
        "name": cfg.name,
        "params": n_params,
        "size_bytes": size,
        "heldout_accuracy": sum(ok) / len(ok),
        "heldout_n": len(ok),
        "heldout_steps": list(cfg.eval_steps),
        "heldout_accuracy_by_steps": {str(k): v for k, v in {**acc, **extra}.items()},
        "heldout_eval": {
            "split": "heldout",
            "seed": cfg.eval_seed,
            "n_per_step_count": cfg.eval_n,
            "role": "solver",
            "decoding": "greedy",
        },  # fmt: skip
        "train_template_accuracy_steps_2_3": sum(in_dist.values()) / len(in_dist),
        "vocab": len(tok),
        # from the loss log (one entry per `log_every` steps): where pretraining handed over to SFT
        "pretrain_steps": max((e["step"] for e in state["log"] if e["stage"] == "pretrain"), default=0),
        "pretrain_tokens": max((e["tokens"] for e in state["log"] if e["stage"] == "pretrain"), default=0),
        "best_step": best["step"],
        "steps": state["step"],
        "seed": cfg.seed,
        # every invocation that contributed (a run extended with --resume lists both)
        "train_command": " && ".join(state.get("commands") or [_preset_command(cfg)]),
        "wall_time_s": round(state["elapsed"], 1),
        "eval_time_s": round(eval_s, 1),
        "tokens_seen": state["tokens"],
        "tokens_per_s": round(state["tokens"] / max(state["elapsed"], 1e-9), 1),
        "torch_threads": cfg.threads,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "config": dataclasses.asdict(cfg),
        "val_history": state["val"],
    }
    write_model_card(
        final,
        card,
        model_card_markdown(card),
        _loss_curves(state["log"]),
        xlabel="tokens seen (millions)",
        ylabel="cross-entropy",
        colors=STAGE_COLORS,
    )
    (Path(cfg.out_dir) / "train_log.json").write_text(json.dumps(state["log"]) + "\n")
    if cfg.export_dir:
        dst = Path(cfg.export_dir)
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(final, dst)
        logger.info("exported %s -> %s", final, dst)
    logger.info("held-out accuracy %.3f %s", card["heldout_accuracy"], card["heldout_accuracy_by_steps"])
    return card


def _preset_command(cfg: BuiltinConfig) -> str:
    return f"python -m finetune.train_builtin --config finetune/recipes/{cfg.name}.yaml"


STAGE_COLORS = {
    "pretrain (loss on all tokens)": "tab:blue",
    "sft (loss on assistant tokens)": "tab:orange",
}


def _loss_curves(log: list[dict]) -> list[tuple[str, list, list]]:
    """Training loss against tokens seen (millions), pretraining and SFT as two curves."""
    curves = []
    for stage in ("pretrain", "sft"):
        pts = [(e["tokens"] / 1e6, e["loss"]) for e in log if e["stage"] == stage]
        label = f"{stage} (loss on {'all' if stage == 'pretrain' else 'assistant'} tokens)"
        curves.append((label, [x for x, _ in pts], [y for _, y in pts]))
    return curves


def _frames_line() -> str:
    from eval.tasks.arith_data import (
        HELDOUT_NOUNS,
        HELDOUT_TEMPLATES,
        SCENE_PREFIXES,
        TRAIN_NOUNS,
        TRAIN_TEMPLATES,
    )

    return (
        f"{len(TRAIN_TEMPLATES)} training story frames (openings x question forms, {len(SCENE_PREFIXES)} optional scene "
        f"prefixes) over {len(TRAIN_NOUNS)} nouns; the test uses {len(HELDOUT_TEMPLATES)} held-out frames and "
        f"{len(HELDOUT_NOUNS)} held-out nouns whose wording never occurs in training."
    )


def model_card_markdown(card: dict) -> str:
    """The model card README.md next to the checkpoint (`finetune.model_card.card_markdown`)."""
    c = card["config"]
    rows = "\n".join(
        f"| {k} | {v:.1%} | {'headline' if int(k) in card['heldout_steps'] else 'extra'} |"
        for k, v in card["heldout_accuracy_by_steps"].items()
    )
    commands = " then ".join(f"`{c}`" for c in card["train_command"].split(" && "))
    vals = "\n".join(f"| {v['step']} | {v['minutes']:.1f} | {v['acc']:.1%} |" for v in card["val_history"])
    intro = f"""A {card["params"] / 1e6:.2f}M-parameter Llama-style chat model trained from scratch on two shared CPU cores by
`finetune/train_builtin.py`. It solves short multi-step arithmetic word problems
(`eval/tasks/arith_data.py`) step by step, one line per operation, and ends with `\\boxed{{answer}}`.
It also accepts the multi-agent role prompts of `ROLE_SYSTEM_PROMPTS` (planner, critic, refiner,
judger, math/science/code experts, summarizer), with a hint or draft from a previous agent in the user turn.
It is a toy for running latentworks offline, not a general language model.

Data: {_frames_line()}"""
    training = f"""- Command{"s (run, then extended with --resume)" if " && " in card["train_command"] else ""}: {commands}
- Seed: {card["seed"]}; torch threads: {card["torch_threads"]}; fp32 on CPU; transformers {card["transformers_version"]}, torch {card["torch_version"]}.
- Wall time: {card["wall_time_s"] / 60:.1f} min of training ({card["steps"]} steps, {card["tokens_seen"] / 1e6:.2f}M tokens,
  {card["tokens_per_s"]:.0f} tokens/s on a CPU shared with other jobs), plus {card["eval_time_s"]:.0f} s of evaluation.
- Architecture: hidden {c["hidden_size"]}, {c["num_hidden_layers"]} layers, {c["num_attention_heads"]} heads,
  MLP {c["intermediate_size"]}, tied embeddings, byte-level BPE vocabulary of {card["vocab"]} tokens
  (single-digit tokens), packed rows of {c["seq_len"]} tokens, batch {c["batch_size"]}.
- Schedule: pretraining on plain problem+solution text and bare-solution drills (loss on all tokens) for
  {card["pretrain_steps"]} steps ({card["pretrain_tokens"] / 1e6:.2f}M tokens), 1-2 step problems only at first;
  then SFT on chat samples of every role, {c["context_frac"]:.0%} of them with a hint or a (sometimes wrong)
  draft in the user turn, loss on the assistant turn only. AdamW, peak LR {c["lr"]}, warmup + cosine over
  the time budget ({c["max_minutes"]} min). The released weights are the checkpoint with the best validation
  accuracy (step {card["best_step"]}; validation uses a different seed from the test below).

{LOSS_CURVE}"""
    heldout = f"""Test set: held-out story templates never seen in training, seed {card["heldout_eval"]["seed"]},
{card["heldout_eval"]["n_per_step_count"]} problems per step count. Headline (steps {card["heldout_steps"]}):
**{card["heldout_accuracy"]:.1%}** on {card["heldout_n"]} problems. On train templates (new seeds), steps 2-3:
{card["train_template_accuracy_steps_2_3"]:.1%}.

| operations | accuracy | |
|---|---|---|
{rows}

Validation accuracy during training:

| step | minutes | val accuracy |
|---|---|---|
{vals}"""
    limitations = """- Only the arithmetic word problems of `eval/tasks/arith_data.py`: operands <= 50, multiplication by 2-5,
  totals below 1000, 1-4 operations. Anything else (free text, other tasks) produces fluent-looking nonsense.
- Every role answers with a worked solution; role prompts change the wording of the system turn, not the
  behaviour. The critic does not write a critique: it writes a corrected solution.
- Accuracy falls with the number of operations and on unseen wording; it is a small model trained for
  about an hour on a shared CPU.
- English only; the tokenizer saw only the training templates, so new words are split into short pieces."""
    sections = [
        ("Training", training),
        ("Held-out accuracy (greedy, solver prompt)", heldout),
        ("Limitations", limitations),
    ]
    return card_markdown(f"builtin:{card['name']}", intro, sections)


def run(args: argparse.Namespace) -> int:
    """`latentworks finetune builtin ...`: validate everything, then train, evaluate and export."""
    from latent.args import config_from_args
    from latent.entry import on_interrupt

    opts = config_from_args(BuiltinOptions, args, files=False)
    cfg = config_from_args(BuiltinConfig, args, presets=TINY_OVERRIDES if opts.tiny else None)
    argv = list(getattr(args, "argv_", ["builtin"]))
    command = shlex.join(["latentworks", "finetune", *argv])
    again = shlex.join(["latentworks", "finetune", *[a for a in argv if a != "--resume"], "--resume"])
    on_interrupt(f"checkpoints are in {cfg.out_dir}/ckpt; continue with:\n  {again}")
    card = train(cfg, resume=opts.resume, command=command)
    logger.info(
        "done: %s", {k: card[k] for k in ("heldout_accuracy", "heldout_n", "wall_time_s", "tokens_seen")}
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m finetune.train_builtin ...`` == ``latentworks finetune builtin ...``."""
    from finetune import cli
    from latent.entry import run_script

    argv = ["builtin", *(sys.argv[1:] if argv is None else argv)]
    return run_script(
        "latentworks finetune", cli.__doc__.split("\n\n")[0], cli.add_arguments, cli.run, argv, extra="train"
    )


if __name__ == "__main__":
    raise SystemExit(main())
