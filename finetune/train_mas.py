"""Fine-tune a built-in model for multi-agent work: every role of the default graphs, and latent hand-off.

Two kinds of batches alternate (`latent_frac` of them latent):
- text: a role's prompt with 0-3 upstream drafts (correct ones, wrong ones, a plan), laid out exactly as
  text_mas hands them on (`agents.PromptSet`); the target is always the correct solution, so a later
  role learns to recompute rather than copy a wrong draft.
- latent: a graph (sequential or hierarchical) run as latent_mas by `agents.final_agent_view` over a
  differentiable `WorkingMemory`: the same prompts, memory views and realignment as inference. The
  final agent is scored on the correct solution; gradients flow through every upstream agent's latent
  thoughts into the weights that produced them (Coconut-style training of continuous thoughts). The
  number of thoughts per agent grows over a curriculum (`latent_curriculum`), 1 -> `latent_steps`.

The loop is `transformers.Trainer`'s; checkpoints every `save_steps` let an interrupted run resume
(`--resume`). The result is exported as a built-in model with a card (command, seed, wall time, a
held-out table of single / text_mas / latent_mas).

Run: ``python -m finetune.train_mas --config finetune/recipes/arith-mini-v4.yaml``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from eval.arith_data import (
    ROLE_SYSTEM_PROMPTS,
    ArithProblem,
    extract_boxed_int,
    make_context,
    make_problems,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from latent import LatentModel

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
GRAPH_NAMES = ("sequential", "hierarchical")


@dataclass
class MasTrainConfig:
    """Every setting of multi-agent fine-tuning; YAML recipes and CLI flags fill this dataclass."""

    base: str = field(default="builtin:arith-mini-v3", metadata={"help": "model to start from (load_model)"})
    name: str = field(default="arith-mini", metadata={"help": "name of the exported built-in model"})
    version: int = field(default=4, metadata={"help": "version number written into the card"})
    out_dir: str = field(default="runs/arith-mini-v4", metadata={"help": "trainer checkpoints and logs"})
    export_dir: str = field(default="", metadata={"help": "where the model is exported ('' = out_dir/model)"})
    seed: int = field(default=0, metadata={"help": "seeds the data, the Trainer and evaluation sampling"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    context_length: int = field(
        default=1024,
        metadata={"help": "max_position_embeddings of the exported model (RoPE: no new weights)"},
    )
    graphs: list[str] = field(default_factory=lambda: list(GRAPH_NAMES), metadata={"help": "latent graphs"})
    latent_steps: int = field(default=8, metadata={"help": "latent thoughts per upstream agent at the end"})
    latent_curriculum: list[int] = field(
        default_factory=lambda: [1, 2, 4, 8], metadata={"help": "thoughts per agent, stage by stage"}
    )
    curriculum_frac: float = field(
        default=0.5, metadata={"help": "fraction of the steps spent ramping through the curriculum"}
    )
    latent_frac: float = field(default=0.5, metadata={"help": "fraction of batches that are latent"})
    prompt_sets: list[str] = field(
        default_factory=lambda: ["default"],
        metadata={"help": "prompt sets latent batches draw from (e.g. default, compact)"},
    )
    max_drafts: int = field(default=3, metadata={"help": "most upstream text drafts in a text sample"})
    wrong_draft_frac: float = field(default=0.4, metadata={"help": "share of drafts that are wrong"})
    hint_frac: float = field(default=0.2, metadata={"help": "share of drafts that are an operation plan"})
    problem_steps: list[int] = field(
        default_factory=lambda: [1, 2, 2, 3, 3, 3, 4], metadata={"help": "operation counts, sampled"}
    )
    batch_size: int = field(default=8, metadata={"help": "problems per step"})
    lr: float = field(default=5e-4, metadata={"help": "peak learning rate (AdamW, cosine)"})
    warmup_steps: int = field(default=50, metadata={"help": "linear warmup steps"})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay"})
    max_steps: int = field(default=2000, metadata={"help": "optimizer steps"})
    max_minutes: float = field(default=0.0, metadata={"help": "stop after this many minutes (0 = no limit)"})
    realign_every: int = field(default=25, metadata={"help": "steps between recomputing the ridge aligner"})
    logging_steps: int = field(default=25, metadata={"help": "steps between loss-log entries"})
    save_steps: int = field(default=200, metadata={"help": "steps between resumable checkpoints"})
    resume: bool = field(default=False, metadata={"help": "continue from the newest checkpoint in out_dir"})
    eval_n: int = field(default=64, metadata={"help": "held-out problems per method and graph (0 = none)"})
    eval_seed: int = field(default=2024, metadata={"help": "seed of the held-out problems"})
    max_new_tokens: int = field(default=96, metadata={"help": "decode budget at evaluation"})
    task: str = field(
        default="arith",
        metadata={
            "help": "arith graphs, or the hand-off task (finetune/train_handoff.py)",
            "choices": ("arith", "handoff"),
        },
    )
    levels: list[str] = field(
        default_factory=lambda: ["relay", "pick", "sum"],
        metadata={"help": "hand-off levels (--task handoff)"},
    )
    anti_weight: float = field(
        default=0.5, metadata={"help": "hand-off anti-shortcut weight (--task handoff)"}
    )
    note_weight: float = field(
        default=1.0, metadata={"help": "hand-off: weight of thought j spelling note token j (--task handoff)"}
    )
    embed_weight: float = field(
        default=0.0,
        metadata={
            "help": "hand-off: weight pulling realigned thought j to note token j's embedding (0 = off)"
        },
    )
    token_thought_frac: float = field(
        default=0.0,
        metadata={
            "help": "hand-off: share of latent batches reading note-token embeddings as thoughts at first"
        },
    )
    token_thought_until: float = field(
        default=0.5, metadata={"help": "hand-off: fraction of steps over which that share falls to 0"}
    )
    text_until: float = field(
        default=0.3, metadata={"help": "hand-off: fraction of steps over which text batches fall to 10%"}
    )
    aligner_lr: float = field(default=1e-4, metadata={"help": "hand-off: aligner learning rate (LoRA runs)"})
    chat_template: str = field(
        default="",
        metadata={
            "help": "hand-off: chat template for a base model without one (gemma, chatml or a Jinja file); "
            "saved with the model ('' = the model's own)"
        },
    )
    handoff_k_schedule: list[int] = field(
        default_factory=list,
        metadata={
            "help": "hand-off: thoughts per holder over the first half ([] = 1, 2, 4, .. latent_steps)"
        },
    )

    def __post_init__(self) -> None:
        problems = []
        bad = sorted(set(self.graphs) - set(GRAPH_NAMES))
        if bad or not self.graphs:
            problems.append(f"`graphs` must be a non-empty subset of {GRAPH_NAMES}, got {self.graphs}")
        if not self.prompt_sets:
            problems.append("`prompt_sets` must name at least one prompt set (e.g. [default])")
        if not self.latent_curriculum or any(k < 1 for k in self.latent_curriculum):
            problems.append(f"`latent_curriculum` must be integers >= 1, got {self.latent_curriculum}")
        elif self.latent_curriculum[-1] != self.latent_steps:
            problems.append(
                f"`latent_curriculum` must end at `latent_steps` ({self.latent_steps}), "
                f"got {self.latent_curriculum}"
            )
        for name in ("latent_frac", "curriculum_frac", "wrong_draft_frac", "hint_frac"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"`{name}` must be in [0, 1], got {getattr(self, name)}")
        if self.wrong_draft_frac + self.hint_frac > 1:
            problems.append("`wrong_draft_frac` + `hint_frac` must be <= 1")
        if not 0 <= self.max_drafts <= 3:
            problems.append(f"`max_drafts` must be in 0-3, got {self.max_drafts}")
        if any(not 1 <= s <= 4 for s in self.problem_steps) or not self.problem_steps:
            problems.append(f"`problem_steps` must be operation counts in 1-4, got {self.problem_steps}")
        for name in ("batch_size", "max_steps", "threads", "realign_every", "logging_steps", "save_steps"):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.token_thought_frac <= 1 or not 0 < self.token_thought_until <= 1:
            problems.append("`token_thought_frac` must be in [0, 1] and `token_thought_until` in (0, 1]")
        if self.handoff_k_schedule and (
            any(k < 1 for k in self.handoff_k_schedule) or self.handoff_k_schedule[-1] != self.latent_steps
        ):
            problems.append(
                f"`handoff_k_schedule` must be integers >= 1 ending at `latent_steps` ({self.latent_steps}), "
                f"got {self.handoff_k_schedule}"
            )
        if self.chat_template:
            from latent.tokenizer import chat_template

            try:  # checked here so that a typo fails before any model is loaded
                chat_template(self.chat_template)
            except ValueError as err:
                problems.append(f"`chat_template`: {err}".rstrip("."))
        if self.eval_n < 0 or self.max_minutes < 0 or self.lr <= 0:
            problems.append("`eval_n` and `max_minutes` must be >= 0 and `lr` > 0")
        if problems:
            raise ValueError("invalid MasTrainConfig: " + "; ".join(problems) + ".")

    @property
    def export_path(self) -> Path:
        return Path(self.export_dir) if self.export_dir else Path(self.out_dir) / "model"

    def thoughts_at(self, step: int) -> int:
        """Thoughts per upstream agent at optimizer step `step` (the curriculum stage)."""
        ramp = self.curriculum_frac * self.max_steps
        stages = self.latent_curriculum
        if ramp <= 0 or step >= ramp:
            return stages[-1]
        return stages[min(int(step / ramp * len(stages)), len(stages) - 1)]


# ----------------------------------------------------------------------------- data


def _problem(cfg: MasTrainConfig, idx: int) -> ArithProblem:
    rng = random.Random(f"mas-steps|{cfg.seed}|{idx}")
    steps = rng.choice(cfg.problem_steps)
    return make_problems(1, seed=cfg.seed * 1_000_003 + idx, split="train", steps=(steps,))[0]


def _drafts(cfg: MasTrainConfig, problem: ArithProblem, rng: random.Random, upstream: tuple[str, ...]):
    """0-`max_drafts` upstream texts credited to upstream agents, as text_mas writes them."""
    n = rng.randint(0, cfg.max_drafts)
    out = []
    for name in upstream[:n]:
        u = rng.random()
        kind = (
            "wrong_draft"
            if u < cfg.wrong_draft_frac
            else "hint"
            if u < cfg.wrong_draft_frac + cfg.hint_frac
            else "draft"
        )
        out.append((name, make_context(problem, kind, rng)))
    return out


class MasCollator:
    """Row indices -> one batch, text or latent (decided per batch, deterministic in the first index)."""

    def __init__(self, cfg: MasTrainConfig, tokenizer: PreTrainedTokenizerBase) -> None:
        from agents import Graph, PromptSet

        self.cfg, self.tok = cfg, tokenizer
        self.prompt_sets = {name: PromptSet.load(name) for name in cfg.prompt_sets}
        self.prompts = self.prompt_sets[cfg.prompt_sets[0]]
        for name, ps in self.prompt_sets.items():  # text batches use the first set: the others must agree
            if (ps.system, ps.user, ps.user_with_context) != (
                self.prompts.system,
                self.prompts.user,
                self.prompts.user_with_context,
            ):
                raise ValueError(
                    f"prompt set {name!r} differs from {cfg.prompt_sets[0]!r} outside `user_in_memory`: "
                    "text batches could not match both. Train the sets separately."
                )
        self.graphs = {name: Graph.resolve(name) for name in cfg.graphs}
        self.step = 0  # the Trainer's optimizer step, kept current by `CurriculumCallback`

    def _ids(self, msgs: list[dict], solution: str) -> tuple[list[int], list[int]]:
        text = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        p = self.tok(text, add_special_tokens=False)["input_ids"]
        c = self.tok(solution + self.tok.eos_token, add_special_tokens=False)["input_ids"]
        return p + c, [IGNORE_INDEX] * len(p) + c

    def __call__(self, rows: list[dict]) -> dict:
        from agents import question_in_memory

        cfg = self.cfg
        idx = [int(r["idx"]) for r in rows]
        rng = random.Random(f"mas-batch|{cfg.seed}|{idx[0]}")
        problems = [_problem(cfg, i) for i in idx]
        latent = rng.random() < cfg.latent_frac
        graph = rng.choice(cfg.graphs)
        g = self.graphs[graph]
        prompt_set = cfg.prompt_sets[0]
        if latent and len(cfg.prompt_sets) > 1:
            prompt_set = rng.choice(cfg.prompt_sets)
        again = question_in_memory(g, g.final, "latent_mas")
        upstream = tuple(name for name in g.order() if name != g.final)  # who a text draft is credited to
        seqs = []
        for p in problems:
            if latent:
                msgs = self.prompt_sets[prompt_set].messages(
                    g.agent(g.final).role, p.question, question_in_memory=again
                )
            else:
                role = rng.choice(sorted(ROLE_SYSTEM_PROMPTS))
                msgs = self.prompts.messages(role, p.question, _drafts(cfg, p, rng, upstream))
            seqs.append(self._ids(msgs, p.solution))
        ids, mask, labels = _left_pad(seqs, int(self.tok.pad_token_id))
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if latent:
            batch.update(
                questions=[p.question for p in problems],
                graph=graph,
                thoughts=cfg.thoughts_at(self.step),
                prompts=prompt_set,
            )
        return batch


def _left_pad(seqs: list[tuple[list[int], list[int]]], pad: int):
    n = max(len(x) for x, _ in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    labels = torch.full((len(seqs), n), IGNORE_INDEX, dtype=torch.long)
    for r, (x, y) in enumerate(seqs):
        ids[r, n - len(x) :] = torch.tensor(x)
        mask[r, n - len(x) :] = 1
        labels[r, n - len(y) :] = torch.tensor(y)
    return ids, mask, labels


# ----------------------------------------------------------------------------- the trained path


def memory_state(lm: LatentModel, questions: list[str], graph: str, thoughts: int, prompts: str = "default"):
    """The state the final agent of `graph` reads under latent_mas, built with gradients."""
    from agents import RunConfig, final_agent_view
    from latent.memory import WorkingMemory

    run = RunConfig(method="latent_mas", latent_steps=thoughts, threads=None, prompts=prompts)
    _, state = final_agent_view(graph, lm, questions, run, WorkingMemory(lm, grad=True))
    return state


def mas_loss(lm: LatentModel, batch: dict) -> torch.Tensor:
    """Cross-entropy on the assistant tokens of a text batch, or of the final agent after the latent_mas
    memory of its graph for a latent batch (gradients through every latent thought)."""
    questions = batch.get("questions")
    state = None
    if questions:
        state = memory_state(lm, questions, batch["graph"], int(batch["thoughts"]), batch["prompts"])
    hidden, _ = lm.forward_embeds(lm.embed(batch["input_ids"]), batch["attention_mask"], state)
    logits = lm.logits(hidden)
    return nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]),
        batch["labels"][:, 1:].reshape(-1).to(logits.device),
        ignore_index=IGNORE_INDEX,
    )


def _trainer_class():
    from transformers import Trainer

    class MasTrainer(Trainer):
        """`Trainer` with the multi-agent loss; the model it saves and resumes is the plain causal LM."""

        def __init__(self, latent_model, **kwargs) -> None:
            super().__init__(model=latent_model.model, **kwargs)
            self.latent_model = latent_model

        def compute_loss(self, model: nn.Module, inputs, return_outputs=False, num_items_in_batch=None):
            loss = mas_loss(self.latent_model, inputs)
            return (loss, None) if return_outputs else loss

    return MasTrainer


def _callbacks(cfg: MasTrainConfig, lm: LatentModel, collator: MasCollator):
    from transformers import TrainerCallback

    class CurriculumCallback(TrainerCallback):
        """Keeps the collator's curriculum step current, re-derives the ridge aligner from the updated
        embeddings every `realign_every` steps, and stops at the time budget."""

        def __init__(self) -> None:
            self.deadline = time.monotonic() + 60 * cfg.max_minutes if cfg.max_minutes else None

        def on_step_end(self, args, state, control, **kwargs):
            collator.step = state.global_step
            if state.global_step % cfg.realign_every == 0:
                lm.refresh_aligner()
            if self.deadline is not None and time.monotonic() > self.deadline:
                logger.info("time budget reached after %d steps; stopping", state.global_step)
                control.should_training_stop = True
            return control

        def on_train_begin(self, args, state, control, **kwargs):
            collator.step = state.global_step
            lm.refresh_aligner()

    return [CurriculumCallback()]


def train(cfg: MasTrainConfig, lm: LatentModel) -> tuple[list[dict], int]:
    """The `transformers.Trainer` loop; returns the loss log and the steps taken."""
    from datasets import Dataset
    from transformers import TrainingArguments

    for p in lm.model.parameters():
        p.requires_grad_(True)
    collator = MasCollator(cfg, lm.tokenizer)
    data = Dataset.from_dict({"idx": list(range(cfg.max_steps * cfg.batch_size))})
    args = TrainingArguments(
        output_dir=str(Path(cfg.out_dir) / "trainer"),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        lr_scheduler_type="cosine",
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=2,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False,
        dataloader_num_workers=0,
        seed=cfg.seed,
        disable_tqdm=False,
    )
    trainer = _trainer_class()(
        lm,
        args=args,
        train_dataset=data,
        data_collator=collator,
        callbacks=_callbacks(cfg, lm, collator),
    )
    trainer.train(resume_from_checkpoint=cfg.resume or None)
    lm.model.eval()
    lm.refresh_aligner()
    return [h for h in trainer.state.log_history if "loss" in h], trainer.state.global_step


# ----------------------------------------------------------------------------- evaluation and export


def evaluate(cfg: MasTrainConfig, model_path: str) -> list[dict]:
    """single / text_mas / latent_mas on held-out problems for every graph, from the exported model."""
    import agents
    from eval.report import wilson
    from latent import load_model

    if cfg.eval_n == 0:
        return []
    lm = load_model(model_path, device="cpu")
    problems = make_problems(cfg.eval_n, seed=cfg.eval_seed, split="heldout")
    questions = [p.question for p in problems]
    rows = []
    runs = [(m, cfg.prompt_sets[0]) for m in agents.METHODS]
    runs += [("latent_mas", ps) for ps in cfg.prompt_sets[1:]]  # the only method the sets change
    for graph in cfg.graphs:
        for method, prompts in runs:
            run = agents.RunConfig(
                method=method,
                latent_steps=cfg.latent_steps,
                max_new_tokens=cfg.max_new_tokens,
                batch_size=16,
                threads=cfg.threads,
                prompts=prompts,
            )
            t0 = time.perf_counter()
            res = agents.run(graph, lm, questions, config=run)
            wall = time.perf_counter() - t0
            ok = sum(extract_boxed_int(r.text) == p.answer for r, p in zip(res, problems))
            lo, hi = wilson(ok, len(problems))
            toks = sum(r.output_tokens for r in res)
            rows.append(
                {
                    "graph": graph,
                    "method": method,
                    "prompts": prompts,
                    "correct": ok,
                    "n": len(problems),
                    "acc": ok / len(problems),
                    "ci": [lo, hi],
                    "output_tokens": toks,
                    "wall_s": wall,
                }
            )
            logger.info("%s %s: %d/%d, %d tokens, %.1f s", graph, method, ok, len(problems), toks, wall)
    return rows


def export(cfg: MasTrainConfig, lm: LatentModel) -> Path:
    """Save weights, tokenizer and configs as a loadable model directory with the longer context."""
    out = cfg.export_path
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    lm.model.config.use_cache = True  # the Trainer turns it off while training
    lm.model.save_pretrained(tmp, safe_serialization=True)
    lm.tokenizer.save_pretrained(tmp)
    old = out.with_name(out.name + ".old")
    if out.exists():  # the previous export stays whole until the new one is in place
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def table(rows: list[dict]) -> str:
    """Markdown table of `evaluate` rows."""
    lines = [
        "| graph | method | prompts | accuracy | 95% CI | output tokens | wall s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['graph']} | {r['method']} | {r.get('prompts', 'default')} | "
            f"{r['correct']}/{r['n']} ({100 * r['acc']:.1f}%) | "
            f"{100 * r['ci'][0]:.1f}-{100 * r['ci'][1]:.1f}% | {r['output_tokens']} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines)


def solver_accuracy(model_path: str, seed: int, n_per_steps: int = 256) -> dict:
    """The card's solver accuracy: greedy, held-out templates, `n_per_steps` problems of 2 and 3 steps."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.train_builtin import accuracy_by_steps

    model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    problems = make_problems(2 * n_per_steps, seed=seed, split="heldout", steps=(2, 3))
    by_steps, ok = accuracy_by_steps(model, tok, problems)
    return {"acc": sum(ok) / len(ok), "n": len(ok), "by_steps": {str(k): v for k, v in by_steps.items()}}


def plot_loss(log: list[dict], path: Path) -> None:
    """Training loss (text and latent batches together) against optimizer steps."""
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.5), dpi=100, extra="train")
    ax.plot([e["step"] for e in log], [e["loss"] for e in log], color="tab:orange")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (assistant tokens)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def _load_base(cfg: MasTrainConfig):
    """The base model with its context raised to `context_length` (RoPE needs no new weights)."""
    from latent import LatentModel, load_model

    lm = load_model(cfg.base, device="cpu" if not torch.cuda.is_available() else None)
    lm.model.config.max_position_embeddings = cfg.context_length
    return LatentModel(lm.model, lm.tokenizer)


def _command(cfg: MasTrainConfig, recipe: str | None) -> str:
    return f"python -m finetune.train_mas --config {recipe}" if recipe else "python -m finetune.train_mas"


def train_and_export(cfg: MasTrainConfig, recipe: str | None = None) -> dict:
    """Train, export, evaluate, write the card. Returns the card."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lm = _load_base(cfg)
    t0 = time.perf_counter()
    log, steps = train(cfg, lm)
    train_s = time.perf_counter() - t0
    path = export(cfg, lm)
    (out / "loss_log.json").write_text(json.dumps(log, indent=2))
    plot_loss(log, path / "loss_curve.png")
    t0 = time.perf_counter()
    solver = solver_accuracy(str(path), cfg.eval_seed)
    rows = evaluate(cfg, str(path))
    eval_s = time.perf_counter() - t0
    card = _card(cfg, lm, path, recipe, log, steps, train_s, eval_s, solver, rows)
    (path / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (path / "README.md").write_text(model_card_markdown(card))
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card


def _card(cfg, lm: LatentModel, path: Path, recipe, log, steps, train_s, eval_s, solver, rows) -> dict:
    import transformers

    n_params = sum(p.numel() for p in lm.model.parameters())
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    return {
        "name": cfg.name,
        "version": cfg.version,
        "base": cfg.base,
        "params": n_params,
        "size_bytes": size,
        "heldout_accuracy": solver["acc"],
        "heldout_n": solver["n"],
        "heldout_steps": [2, 3],
        "heldout_accuracy_by_steps": solver["by_steps"],
        "heldout_eval": {
            "split": "heldout",
            "seed": cfg.eval_seed,
            "n_per_step_count": solver["n"] // 2,
            "role": "solver",
            "decoding": "greedy",
        },
        "mas_eval": rows,
        "latent_steps": cfg.latent_steps,
        "seed": cfg.seed,
        "train_command": _command(cfg, recipe),
        "steps": steps,
        "problems_seen": steps * cfg.batch_size,
        "tokens_seen": None,  # sequences vary with the graph; `problems_seen` counts the data
        "wall_time_s": round(train_s, 1),
        "eval_time_s": round(eval_s, 1),
        "torch_threads": cfg.threads,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "final_loss": log[-1]["loss"] if log else None,
        "config": dataclasses.asdict(cfg),
    }


def model_card_markdown(card: dict) -> str:
    """The README.md next to the exported model."""
    c = card["config"]
    mas = table(card["mas_eval"]) if card["mas_eval"] else "(no multi-agent evaluation: eval_n = 0)"
    by = "\n".join(f"| {k} | {v:.1%} |" for k, v in card["heldout_accuracy_by_steps"].items())
    older = ", ".join(f"`builtin:{card['name']}-v{v}`" for v in range(card["version"] - 1, 2, -1))
    stages = c["latent_curriculum"]
    thoughts = (
        f"{stages[-1]} thoughts per agent throughout"
        if len(stages) == 1
        else f"thoughts per agent grow {stages} over the first {100 * c['curriculum_frac']:.0f}% of steps"
    )
    sets = c.get("prompt_sets", ["default"])
    prompt_note = (
        f"\n- Latent batches draw their prompt set from {sets} (`compact`: an agent that reads upstream\n"
        "  prompts from the memory is not given the question again)."
        if len(sets) > 1
        else ""
    )
    return f"""# builtin:{card["name"]} (version {card["version"]})

A {card["params"] / 1e6:.2f}M-parameter Llama-style chat model for short arithmetic word problems
(`eval/arith_data.py`), fine-tuned from `{card["base"]}` by `finetune/train_mas.py` to work as every
role of the default agent graphs, in text and in latent hand-off. Earlier versions stay loadable under
their versioned names ({older or "none"}).

## Training
- Command: `{card["train_command"]}` (seed {card["seed"]}, {card["torch_threads"]} torch thread, fp32 on CPU,
  transformers {card["transformers_version"]}, torch {card["torch_version"]}).
- Wall time: {card["wall_time_s"] / 60:.1f} min of training ({card["steps"]} optimizer steps of {c["batch_size"]}
  problems), {card["eval_time_s"]:.0f} s of evaluation.
- Data: train-split problems with {c["problem_steps"]} operations. {100 * (1 - c["latent_frac"]):.0f}% of batches are
  text: a random role with 0-{c["max_drafts"]} upstream drafts laid out as text_mas hands them on
  ({100 * c["wrong_draft_frac"]:.0f}% of drafts wrong, {100 * c["hint_frac"]:.0f}% an operation plan, the rest correct),
  target the correct solution. {100 * c["latent_frac"]:.0f}% are latent: the graph ({", ".join(c["graphs"])}) run as
  latent_mas through a differentiable working memory (`agents.final_agent_view`), the final agent scored on the
  correct solution, gradients through every latent thought; {thoughts}.{prompt_note}
- The ridge aligner is re-derived from the embeddings every {c["realign_every"]} steps and at the end, as
  `load_model` derives it.
- AdamW, peak LR {c["lr"]}, {c["warmup_steps"]} warmup steps, cosine; the `transformers.Trainer` loop.
  Context raised to {c["context_length"]} positions (RoPE).

![loss curve](loss_curve.png)

## Held-out accuracy (greedy, solver prompt)
Held-out story templates never seen in training, seed {card["heldout_eval"]["seed"]}, {card["heldout_n"]} problems
of 2-3 operations: **{card["heldout_accuracy"]:.1%}**.

| operations | accuracy |
|---|---|
{by}

## Multi-agent methods ({c["eval_n"]} held-out problems, {card["latent_steps"]} latent thoughts per agent)
Methods run one after another in one process on a shared 2-core CPU, so wall times move with the load;
`latentworks demo` and `bench/latent_mas.py` interleave the methods batch by batch for side-by-side ratios.

{mas}

## Limitations
- Only the arithmetic word problems of `eval/arith_data.py` (operands <= 50, totals below 1000, 1-4
  operations); anything else produces fluent-looking nonsense.
- Every role answers with a worked solution; the critic writes a corrected solution, not a critique.
- Trained with {card["latent_steps"]} latent thoughts per agent: other counts are out of distribution.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`latentworks finetune mas` / `python -m finetune.train_mas` flags, from `MasTrainConfig`."""
    from latent.args import add_config_arguments

    add_config_arguments(parser, MasTrainConfig)


def run(args: argparse.Namespace) -> int:
    """Train from the parsed flags and print the held-out table."""
    from latent.args import config_from_args

    cfg = config_from_args(MasTrainConfig, args)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if cfg.task == "handoff":
        from finetune import handoff_cli

        return handoff_cli.run(cfg, args)
    card = train_and_export(cfg, recipe=getattr(args, "config", None))
    print(table(card["mas_eval"]) if card["mas_eval"] else "(no evaluation)")
    print(
        f"solver accuracy {card['heldout_accuracy']:.1%} on {card['heldout_n']} held-out problems; "
        f"trained {card['wall_time_s'] / 60:.1f} min; model in {cfg.export_path}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    from latent.args import run_script

    return run_script("python -m finetune.train_mas", __doc__.split("\n")[0], add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
