"""Latent-aware fine-tuning: train a LoRA and/or a realignment module so that latent hand-off works.

The loss runs the same path as inference on a `reader -> answerer` graph with a `latent` edge
(`finetune.fact_handoff`): the reader reads its prompt and thinks k latent thoughts through
`LatentModel.think_with_grad`; the answerer reads only those positions (their KV), then its own prompt,
and is scored on the answer tokens. Gradients flow through the answerer, the thoughts' keys/values,
every thought step and the aligner, into the LoRA weights (peft) and the aligner (`TrainableAligner`).
Optionally the answerer is also distilled towards the text hand-off: the frozen base model reading the
fact as a previous agent's text is the teacher, KL on the answer tokens (`distill_weight`).

The optimisation loop is the `transformers.Trainer` one (AdamW, warmup + schedule, logging).

Run: ``latentworks finetune latent-align --config finetune/recipes/smollm2-latent-fact.yaml`` (or
``python -m finetune.latent_align --config ...``)
Outputs in ``out_dir``: ``adapter/`` (PEFT LoRA + tokenizer; `load_model(out_dir/adapter)`),
``aligner.safetensors`` (`load_model(..., realign=<path>)`), ``metrics.json`` (before/after table).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from finetune import fact_handoff as fh
from latent.kv_cache import select_positions
from latent.model import LatentModel
from latent.realign import ALIGNER_KINDS, TrainableAligner
from latent.state import LatentState

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100


@dataclass
class LatentAlignConfig:
    """Every setting of latent-aware fine-tuning; YAML recipes and CLI flags fill this dataclass."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "Model name or path (load_model)."})
    out_dir: str = field(default="runs/latent-align", metadata={"help": "Adapter, aligner and metrics."})
    seed: int = field(default=0, metadata={"help": "Seeds the data, LoRA init and the Trainer."})
    threads: int = field(default=1, metadata={"help": "torch.set_num_threads."})
    latent_steps: int = field(default=8, metadata={"help": "Latent thoughts the reader hands on."})
    train_n: int = field(default=512, metadata={"help": "Training problems (seed `seed`)."})
    eval_n: int = field(default=64, metadata={"help": "Held-out problems for the before/after table."})
    eval_seed: int = field(default=9001, metadata={"help": "Seed of the held-out problems."})
    lora: bool = field(default=True, metadata={"help": "Train a LoRA (peft) on the model."})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha."})
    lora_targets: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={"help": "Module names that get LoRA layers."},
    )
    aligner: str = field(default="linear", metadata={"help": "'linear', 'mlp' or 'none' (fixed ridge map)."})
    mlp_hidden: int = field(default=256, metadata={"help": "Hidden width of an 'mlp' aligner."})
    lr: float = field(default=1e-3, metadata={"help": "Peak learning rate of the LoRA weights."})
    aligner_lr: float = field(default=1e-4, metadata={"help": "Peak learning rate of the aligner."})
    max_steps: int = field(default=100, metadata={"help": "Optimizer steps."})
    max_minutes: float = field(
        default=0.0, metadata={"help": "Stop training after this many minutes (0 = no limit)."}
    )
    batch_size: int = field(default=8, metadata={"help": "Problems per step."})
    warmup_steps: int = field(default=10, metadata={"help": "Linear warmup steps."})
    distill_weight: float = field(
        default=0.0, metadata={"help": "Weight of the KL to the text hand-off teacher (0 = answer CE only)."}
    )
    logging_steps: int = field(default=10, metadata={"help": "Steps between loss-log entries."})
    eval_methods: list[str] = field(
        default_factory=lambda: list(fh.METHODS + fh.ABLATIONS),
        metadata={"help": "Hand-offs scored before and after training."},
    )
    max_new_tokens: int = field(default=6, metadata={"help": "Answer tokens decoded at evaluation."})

    def __post_init__(self) -> None:
        problems = []
        if self.aligner not in ALIGNER_KINDS + ("none",):
            problems.append(f"`aligner` must be one of {ALIGNER_KINDS + ('none',)}, got {self.aligner!r}")
        if not self.lora and self.aligner == "none":
            problems.append("nothing to train: set `lora: true` or an `aligner` ('linear' or 'mlp')")
        if self.latent_steps < 1:
            problems.append(f"`latent_steps` must be >= 1, got {self.latent_steps}")
        for name in ("train_n", "max_steps", "batch_size", "lora_r"):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.eval_n < 0 or self.distill_weight < 0:
            problems.append("`eval_n` and `distill_weight` must be >= 0")
        bad = sorted(set(self.eval_methods) - set(fh.METHODS + fh.ABLATIONS))
        if bad:
            problems.append(f"unknown `eval_methods` {bad}; choose from {fh.METHODS + fh.ABLATIONS}")
        if problems:
            raise ValueError("invalid LatentAlignConfig: " + "; ".join(problems) + ".")


def load_config(path: str | os.PathLike | None = None, **overrides: Any) -> LatentAlignConfig:
    """A config from a YAML recipe (optional) plus keyword overrides; unknown keys are an error."""
    from latent.args import config_from_file

    return config_from_file(LatentAlignConfig, path, **overrides)


# ----------------------------------------------------------------------------- the trained path


def _pad_left(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(r) for r in rows)
    ids = torch.full((len(rows), n), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, n - len(r) :] = torch.tensor(r)
        mask[i, n - len(r) :] = 1
    return ids, mask


class HandoffCollator:
    """Problems -> reader prompt ids, answerer prompt + answer ids (left-padded) and answer labels."""

    def __init__(self, model: LatentModel) -> None:
        self.model = model

    def _chat_ids(self, msgs: list[dict]) -> list[int]:
        return self.model.encode([msgs])["input_ids"][0].tolist()

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        tok = self.model.tokenizer
        probs = [fh.FactProblem(r["fact"], r["question"], int(r["answer"])) for r in rows]
        reader = [self._chat_ids(fh.reader_messages(p)) for p in probs]
        eos = tok.eos_token_id
        full, labels, teacher = [], [], []
        for p in probs:
            prompt = self._chat_ids(fh.answerer_messages(p))
            answer = tok(str(p.answer), add_special_tokens=False)["input_ids"] + [eos]
            full.append(prompt + answer)
            labels.append([IGNORE_INDEX] * len(prompt) + answer)
            teacher.append(self._chat_ids(fh.answerer_messages(p, context=p.fact)) + answer)
        pad = int(tok.pad_token_id)
        r_ids, r_mask = _pad_left(reader, pad)
        a_ids, a_mask = _pad_left(full, pad)
        lab, _ = _pad_left(labels, IGNORE_INDEX)
        lab[a_mask == 0] = IGNORE_INDEX
        t_ids, t_mask = _pad_left(teacher, pad)
        return {
            "reader_ids": r_ids,
            "reader_mask": r_mask,
            "answer_ids": a_ids,
            "answer_mask": a_mask,
            "labels": lab,
            "teacher_ids": t_ids,
            "teacher_mask": t_mask,
        }


def latent_view(model: LatentModel, state: LatentState, start: int) -> LatentState:
    """Positions `start:` of `state` (the thoughts), keys kept at their positions: the `latent` edge's
    view, as `WorkingMemory.state_for` selects it, but differentiable."""
    idx = torch.arange(start, state.length, device=state.attention_mask.device)
    return LatentState(
        cache=select_positions(model.model, state.cache, idx),
        attention_mask=state.attention_mask[:, idx],
        last_hidden=state.last_hidden,
        next_position=state.next_position,
        positions=state.position_ids()[:, idx],
    )


class LatentHandoffModel(nn.Module):
    """The trainable parts (LoRA-wrapped model, aligner) and the latent_mas loss, for `Trainer`."""

    def __init__(
        self, latent_model: LatentModel, steps: int, distill_weight: float = 0.0, teacher_ctx=None
    ) -> None:
        super().__init__()
        self.lm = latent_model
        self.net = latent_model.model  # registers the (LoRA) parameters
        aligner = latent_model.aligner
        self.aligner = aligner if isinstance(aligner, nn.Module) else None
        self.steps = steps
        self.distill_weight = distill_weight
        self.teacher_ctx = teacher_ctx or contextlib.nullcontext

    def _read(self, ids: torch.Tensor, mask: torch.Tensor, state: LatentState | None):
        # The model's own segment forward with autograd on: training reads memory as inference does.
        return self.lm.forward_embeds(self.lm.embed(ids), mask, state)

    def answer_logits(self, reader_ids, reader_mask, answer_ids, answer_mask) -> torch.Tensor:
        """(B, T, V) answerer logits over its prompt + answer, after the reader's latent hand-off."""
        _, st = self._read(reader_ids, reader_mask, None)
        start = st.length
        _, st = self.lm.think_with_grad(st, self.steps)
        hidden, _ = self._read(answer_ids, answer_mask, latent_view(self.lm, st, start))
        return self._logits(hidden)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`LatentModel.logits`, but in the model's precision when that is fp32 or wider (the finite-
        difference tests run in float64); half precision is widened to fp32 for the loss."""
        out = self.lm.model.get_output_embeddings()(hidden)
        if out.dtype in (torch.float16, torch.bfloat16):
            out = out.float()
        cap = getattr(self.lm.config, "final_logit_softcapping", None)
        return torch.tanh(out / cap) * cap if cap else out

    def forward(
        self, reader_ids, reader_mask, answer_ids, answer_mask, labels, teacher_ids=None, teacher_mask=None
    ) -> dict[str, torch.Tensor]:
        logits = self.answer_logits(reader_ids, reader_mask, answer_ids, answer_mask)
        shift_logits, shift_labels = logits[:, :-1], labels[:, 1:].to(logits.device)
        ce = nn.functional.cross_entropy(
            shift_logits.reshape(-1, shift_logits.shape[-1]),
            shift_labels.reshape(-1),
            ignore_index=IGNORE_INDEX,
        )
        loss = ce
        if self.distill_weight > 0 and teacher_ids is not None:
            with torch.no_grad(), self.teacher_ctx():
                t_hidden, _ = self.lm.forward_embeds(self.lm.embed(teacher_ids), teacher_mask, None)
                t_logits = self._logits(t_hidden)
            n_ans = (shift_labels != IGNORE_INDEX).sum(1)  # answers sit at the end of both sequences
            kl = []
            for r in range(logits.shape[0]):
                k = int(n_ans[r])
                s = shift_logits[r, -k:].log_softmax(-1)
                t = t_logits[r, -k - 1 : -1].log_softmax(-1)
                kl.append(nn.functional.kl_div(s, t, log_target=True, reduction="batchmean"))
            loss = ce + self.distill_weight * torch.stack(kl).mean()
        return {"loss": loss, "ce": ce.detach()}


@torch.no_grad()
def handoff_loss(
    model: LatentHandoffModel, collator: HandoffCollator, problems: list[fh.FactProblem]
) -> float:
    """Mean answer cross-entropy of latent hand-off on `problems` (no gradients)."""
    model.eval()
    rows = [dataclasses.asdict(p) for p in problems]
    batch = collator(rows)
    batch.pop("teacher_ids"), batch.pop("teacher_mask")
    distill, model.distill_weight = model.distill_weight, 0.0
    try:
        return float(model(**batch)["loss"])
    finally:
        model.distill_weight = distill


# ----------------------------------------------------------------------------- building and training


def prepare(cfg: LatentAlignConfig, base: LatentModel) -> LatentModel:
    """A LatentModel whose weights train: LoRA layers (peft) and/or a ridge-initialised aligner; the
    base weights are frozen."""
    aligner = None
    if cfg.aligner != "none":
        aligner = TrainableAligner.from_model(base, kind=cfg.aligner, mlp_hidden=cfg.mlp_hidden)
    net = base.model
    for p in net.parameters():
        p.requires_grad_(False)
    if cfg.lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(cfg.seed)
        lcfg = LoraConfig(
            r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules=list(cfg.lora_targets), lora_dropout=0.0
        )
        net = get_peft_model(net, lcfg)
    realign = aligner if aligner is not None else base.aligner
    return LatentModel(net, base.tokenizer, realign=realign)


class TimeBudget(TrainerCallback):
    """Stops training once `minutes` of wall time have passed (a shared CPU is slow to predict)."""

    def __init__(self, minutes: float) -> None:
        self.deadline = time.monotonic() + 60 * minutes

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() > self.deadline:
            logger.info("time budget reached after %d steps; stopping", state.global_step)
            control.should_training_stop = True
        return control


def train(cfg: LatentAlignConfig, lm: LatentModel) -> tuple[LatentHandoffModel, list[dict]]:
    """Run the `transformers.Trainer` loop on the latent_mas loss; returns the module and the loss log."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    teacher_ctx = getattr(lm.model, "disable_adapter", None) if cfg.lora else None
    module = LatentHandoffModel(lm, cfg.latent_steps, cfg.distill_weight, teacher_ctx)
    data = Dataset.from_list([dataclasses.asdict(p) for p in fh.make_problems(cfg.train_n, cfg.seed)])
    groups = []
    lora_params = [p for n, p in module.net.named_parameters() if p.requires_grad]
    if lora_params:
        groups.append({"params": lora_params, "lr": cfg.lr})
    if module.aligner is not None:
        groups.append({"params": list(module.aligner.parameters()), "lr": cfg.aligner_lr})
    optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
    args = TrainingArguments(
        output_dir=str(Path(cfg.out_dir) / "trainer"),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="cosine",
        logging_steps=cfg.logging_steps,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False,
        dataloader_num_workers=0,
        seed=cfg.seed,
        disable_tqdm=True,
    )
    callbacks = [TimeBudget(cfg.max_minutes)] if cfg.max_minutes > 0 else []
    trainer = Trainer(
        callbacks=callbacks,
        model=module,
        args=args,
        train_dataset=data,
        data_collator=HandoffCollator(lm),
        optimizers=(optimizer, None),
    )
    trainer.train()
    module.eval()
    return module, [h for h in trainer.state.log_history if "loss" in h]


def evaluate(cfg: LatentAlignConfig, lm: LatentModel, problems: list[fh.FactProblem]) -> dict[str, dict]:
    """Accuracy (with a Wilson 95% interval) and wall time of every hand-off in `cfg.eval_methods`."""
    from eval.report import wilson

    out = {}
    for method in cfg.eval_methods:
        t0 = time.perf_counter()
        texts = fh.run_handoff(lm, problems, method, cfg.latent_steps, cfg.max_new_tokens, seed=cfg.seed)
        ok = fh.score(problems, texts)
        lo, hi = wilson(sum(ok), len(ok))
        logger.info("%s: %d/%d correct (%.0f s)", method, sum(ok), len(ok), time.perf_counter() - t0)
        out[method] = {
            "correct": sum(ok),
            "n": len(ok),
            "acc": sum(ok) / max(len(ok), 1),
            "ci": [lo, hi],
            "wall_s": time.perf_counter() - t0,
            "examples": texts[:3],
        }
    return out


def _cell(r: dict) -> tuple[str, str]:
    return (
        f"{r['correct']}/{r['n']} ({100 * r['acc']:.1f}%)",
        f"{100 * r['ci'][0]:.1f}-{100 * r['ci'][1]:.1f}%",
    )


def table(before: dict, after: dict) -> str:
    """Markdown before/after table."""
    lines = [
        "| hand-off | before | 95% CI | after | 95% CI |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in before:
        b, a = before[m], after.get(m)
        bb, bc = _cell(b)
        aa, ac = _cell(a) if a else ("-", "-")
        lines.append(f"| {m} | {bb} | {bc} | {aa} | {ac} |")
    return "\n".join(lines)


def save(cfg: LatentAlignConfig, module: LatentHandoffModel, out: Path) -> None:
    """LoRA adapter (+ tokenizer) and aligner, loadable with `load_model(out/adapter, realign=...)`."""
    out.mkdir(parents=True, exist_ok=True)
    if cfg.lora:
        module.net.save_pretrained(out / "adapter")
        module.lm.tokenizer.save_pretrained(out / "adapter")
    if module.aligner is not None:
        module.aligner.save(out / "aligner.safetensors")


def train_and_compare(cfg: LatentAlignConfig) -> dict:
    """Load, score before, train, score after, save. Returns the metrics written to metrics.json."""
    from latent import load_model

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out_dir)
    base = load_model(cfg.model, device="cpu" if not torch.cuda.is_available() else None)
    test = fh.make_problems(cfg.eval_n, cfg.eval_seed)
    t0 = time.perf_counter()
    before = evaluate(cfg, base, test) if cfg.eval_n else {}
    eval_s = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out / "before.json").write_text(json.dumps(before, indent=2))
    lm = prepare(cfg, base)
    collator = HandoffCollator(lm)
    probe = fh.make_problems(32, cfg.eval_seed + 1)
    module = LatentHandoffModel(lm, cfg.latent_steps)
    loss_before = handoff_loss(module, collator, probe)
    t0 = time.perf_counter()
    module, log = train(cfg, lm)
    train_s = time.perf_counter() - t0
    loss_after = handoff_loss(module, collator, probe)
    after = evaluate(cfg, lm, test) if cfg.eval_n else {}
    save(cfg, module, out)
    metrics = {
        "config": dataclasses.asdict(cfg),
        "latent_loss_before": loss_before,
        "latent_loss_after": loss_after,
        "train_wall_s": train_s,
        "train_steps": log[-1]["step"] if log else 0,
        "eval_wall_s_before": eval_s,
        "before": before,
        "after": after,
        "loss_log": log,
        "torch_threads": torch.get_num_threads(),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per LatentAlignConfig field, plus --config and --set (the shared builder)."""
    from latent.args import add_config_arguments

    add_config_arguments(parser, LatentAlignConfig)


def run(args: argparse.Namespace) -> int:
    """`latentworks finetune latent-align ...`: validate, train, and print the before/after table."""
    from latent.args import config_from_args

    cfg = config_from_args(LatentAlignConfig, args)
    t0 = time.perf_counter()
    m = train_and_compare(cfg)
    print(table(m["before"], m["after"]) if m["before"] else "(no evaluation: eval_n = 0)")
    print(
        f"latent_mas answer loss {m['latent_loss_before']:.3f} -> {m['latent_loss_after']:.3f}; "
        f"train {m['train_wall_s']:.0f} s, total {time.perf_counter() - t0:.0f} s; outputs in {cfg.out_dir}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m finetune.latent_align ...`` == ``latentworks finetune latent-align ...``."""
    import sys

    from finetune import cli
    from latent.entry import run_script

    argv = ["latent-align", *(sys.argv[1:] if argv is None else argv)]
    return run_script(
        "latentworks finetune", cli.__doc__.split("\n\n")[0], cli.add_arguments, cli.run, argv, extra="train"
    )


if __name__ == "__main__":
    raise SystemExit(main())
