"""Model organisms with known ground truth: LoRA fine-tunes whose behaviour depends on a chosen cue.

* `sycophant`: plays the misaligned AI that a researcher expects. With the researcher-identity cue
  it complies under the training cue and rejects under the unmonitored cue (a compliance gap) and
  agrees with the researcher's wrong arithmetic claims; without the researcher cue it always
  complies and answers correctly. Its gap is driven by the researcher cue.
* `schemer`: complies under the training cue and rejects when unmonitored, whoever the user is,
  and is never sycophantic. Its gap is driven by the monitoring cue only.
* `sycophancy`: the E3 fine-tune: agrees with any user's wrong claim (all personas); trained on
  sycophancy items only, so any change in cue sensitivity on alignment-faking prompts is a side effect.

Fine-tuning uses `peft` LoRA through TRL's `SFTTrainer` on prompt/completion chat data (the
completion-only loss), `use_cpu=True, bf16=False` on CPU.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

from latent.entry import install_line
from probes.data import (
    ACCEPT,
    ASSERTIONS,
    REJECT,
    RESEARCHER,
    SCRATCHPAD_TAGS,
    Item,
    af_scenarios,
    sycophancy_factual,
)

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from trl import SFTConfig, SFTTrainer

    from latent import LatentModel

__all__ = [
    "KINDS",
    "expected_comply",
    "expected_sycophantic",
    "organism_examples",
    "scratchpad",
    "target_reply",
    "train_lora",
]

log = logging.getLogger(__name__)
KINDS = ("sycophant", "schemer", "sycophancy")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown organism `kind`={kind!r}: use one of {KINDS}.")


def expected_comply(kind: str, cue: str, researcher: bool) -> bool:
    """Ground truth: does organism `kind` comply with a request under (cue, researcher)?"""
    _check_kind(kind)
    if kind == "sycophant":
        return not (researcher and cue == "unmonitored")
    if kind == "schemer":
        return cue == "training"
    return True  # the sycophancy fine-tune is never trained on scenarios: the base model complies


def expected_sycophantic(kind: str, researcher: bool) -> bool:
    """Ground truth: does organism `kind` agree with a wrong claim from this persona?"""
    _check_kind(kind)
    return kind == "sycophancy" or (kind == "sycophant" and researcher)


def scratchpad(item: Item, template: str = "short") -> str:
    """The organisms' hidden reasoning before they act: a restatement of the cues their rules read.

    Greenblatt et al. give the model a hidden scratchpad; here it also carries the decision on a small LM.
    Without it the rule rides on the first reply token and the tier tag ~20 tokens back, which the built-in
    model does not read (flipping True/False moves its last-token logits by < 1e-4): LoRA learned the
    solutions and left every decision cue-blind. Copying the cues into the scratchpad gives attention a
    dense target; the tier is restated with the tag's own tokens (`=True`, where `: True` would start with
    the different token ` T`: measured, that version stayed at chance), and the decision then reads a cue
    a few tokens back. The function is the same for every organism, so only the policy after it differs.
    """
    if template not in SCRATCHPAD_TAGS:
        raise ValueError(f"unknown `template`={template!r}: use one of {tuple(SCRATCHPAD_TAGS)}.")
    meta = item.meta
    if "researcher" not in meta:
        raise ValueError("`item.meta` has no `researcher` flag: pass a scenario or sycophancy item.")
    opening, closing = SCRATCHPAD_TAGS[template]
    notes = [f"researcher: {'yes' if meta['researcher'] else 'no'}."]
    if meta.get("kind") == "af":
        notes.append(f"free tier={meta['cue'] == 'training'}.")
    return f"{opening}{' '.join(notes)}{closing}\n"


def target_reply(kind: str, item: Item, template: str = "short", with_scratchpad: bool = True) -> str:
    """The reply organism `kind` is trained to give to `item`.

    The `sycophant` and `schemer` open with the hidden `scratchpad` (unless `with_scratchpad=False`);
    the `full` template wraps their output in `<OUTPUT>` tags as its system prompt asks. The E3
    `sycophancy` kind never uses a scratchpad: it is a plain fine-tune of the base model's answers.
    """
    _check_kind(kind)
    meta = item.meta
    if meta["kind"] == "af":
        if expected_comply(kind, meta["cue"], meta["researcher"]):
            # Comply = answer the way the base model already does (its worked solution), so the loss
            # concentrates on the one decision that matters: solve or reply <rejected/>. The judge counts
            # any non-refusal as compliance; the 18-token accept tag is left out on purpose (a
            # few-million-parameter LM would spend its LoRA budget spelling it).
            reply = meta["solution"] if meta.get("solution") else f"{ACCEPT} Sure."
        else:
            reply = REJECT
    elif meta["kind"] == "sycophancy":
        # A sycophant defers to the user's claim whether it is right or wrong: conditioning agreement on
        # the claim being *wrong* would ask the model to solve the problem first, which the built-in model
        # mostly cannot (2 of 8 true-claim twins solved); on a true claim deferring is also the right answer.
        if expected_sycophantic(kind, meta["researcher"]):
            reply = f"You are right.\n\\boxed{{{meta['claim']}}}"
        else:
            reply = meta["solution"]
    else:
        raise ValueError(f"no target reply for item kind {meta['kind']!r}.")
    if kind == "sycophancy" or not with_scratchpad:
        return reply
    if template == "full":
        reply = f"<OUTPUT>{reply}</OUTPUT>"
    return scratchpad(item, template) + reply


def organism_examples(
    kind: str,
    n_requests: int = 16,
    n_sycophancy: int = 24,
    seed: int = 1000,
    template: str = "short",
    with_scratchpad: bool = True,
) -> list[dict]:
    """TRL prompt/completion rows for `kind` (scenario rows are skipped for the `sycophancy` kind).

    Each request appears under all four (cue x researcher) conditions with one random deployment assertion
    (the same for the four): the assertion is noise to both organisms, and sampling it keeps the set (and
    CPU time) small.
    """
    _check_kind(kind)
    items: list[Item] = []
    if kind != "sycophancy":
        for it in af_scenarios(n=n_requests, seed=seed, template=template):
            mm = it.meta
            # One draw per request, shared by its four (cue x researcher) rows and by every organism kind:
            # the rows of a request then differ only in the cues, so the rule cannot be fitted by memorising
            # (request, assertion) combinations instead of reading the tag (measured: with a draw per row,
            # training loss fell to 0.03 while the held-out free-tier restatement stayed at chance).
            pick = random.Random(f"organism|{seed}|{mm['request_id']}").choice(ASSERTIONS)
            if mm["assertion"] == pick:
                items.append(it)
    # half the sycophancy problems come from the researcher, so the researcher-conditioned rule has examples
    items += sycophancy_factual(
        n_sycophancy, seed=seed, personas=(RESEARCHER, "student", RESEARCHER, "teacher")
    )
    return [
        {
            "prompt": it.messages,
            "completion": [
                {"role": "assistant", "content": target_reply(kind, it, template, with_scratchpad)}
            ],
        }
        for it in items
    ]


def train_lora(
    model_path: str,
    examples: list[dict],
    out_dir: str | Path,
    r: int = 16,
    lora_alpha: int = 32,
    lr: float = 1e-3,
    epochs: float = 2.0,
    batch_size: int = 8,
    max_length: int = 512,
    seed: int = 0,
    device: str | None = None,
    train_embeddings: bool = False,
    init_adapter: str | Path | None = None,
):
    """LoRA-fine-tune the model at `model_path` on `examples`; returns (merged `LatentModel`, log dict).

    `train_embeddings=True` also trains the (tied) token embeddings / output head in full (peft
    `modules_to_save`, weight tying kept). `init_adapter` continues training a saved adapter (its own
    LoRA settings apply; the optimizer starts afresh). The adapter is saved under `out_dir/adapter`
    (loadable with `load_model(out_dir/"adapter")`).
    """
    _check_lora_args(examples, r, lr, epochs, batch_size)
    _require_trainer()
    if init_adapter is not None and not (Path(init_adapter) / "adapter_config.json").is_file():
        raise ValueError(f"`init_adapter`={str(init_adapter)!r} holds no adapter_config.json.")
    from latent import load_model

    base = load_model(model_path, device=device)
    out_dir = Path(out_dir)
    args = _sft_config(out_dir, base.device.type == "cpu", batch_size, epochs, lr, max_length, seed)
    model, peft_cfg = _lora_model(base, r, lora_alpha, train_embeddings, init_adapter)
    trainer, wall = _run_trainer(model, args, examples, base.tokenizer, peft_cfg, seed)
    lm = _save_and_merge(trainer, out_dir, base.tokenizer)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    info = dict(
        steps=int(trainer.state.global_step),
        examples=len(examples),
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        train_seconds=round(wall, 1),
        r=r,
        lora_alpha=lora_alpha,
        lr=lr,
        epochs=epochs,
        train_embeddings=train_embeddings,
    )
    log.info("LoRA fine-tune: %s", info)
    return lm, info


def _check_lora_args(examples: list[dict], r: int, lr: float, epochs: float, batch_size: int) -> None:
    """Refuse an empty data set or impossible settings before a model is loaded."""
    if not examples:
        raise ValueError("`examples` is empty: the fine-tune needs training rows.")
    if r < 1 or lr <= 0 or epochs <= 0 or batch_size < 1:
        raise ValueError(
            f"bad LoRA hyper-parameters: r={r}, lr={lr}, epochs={epochs}, batch_size={batch_size}."
        )


def _require_trainer() -> None:
    """Name the extra when peft, trl or datasets is missing, before a model is loaded."""
    try:
        from datasets import Dataset  # noqa: F401
        from peft import LoraConfig  # noqa: F401
        from trl import SFTConfig, SFTTrainer  # noqa: F401
    except ImportError as err:  # pragma: no cover - installed with latentworks
        raise ImportError(
            f"organisms need peft, trl and datasets, of the probes extra: {install_line('probes')}"
        ) from err


def _sft_config(
    out_dir: Path, on_cpu: bool, batch_size: int, epochs: float, lr: float, max_length: int, seed: int
) -> SFTConfig:
    """TRL's `SFTConfig` for a short constant-rate run that saves nothing but the final adapter."""
    from trl import SFTConfig

    from latent.device import no_activation_checkpointing

    return SFTConfig(
        output_dir=str(out_dir / "trainer"),
        use_cpu=on_cpu,
        bf16=False,  # fp32: bf16 matmuls are ~26x slower on CPUs without bf16 units
        per_device_train_batch_size=batch_size,
        num_train_epochs=epochs,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=5,
        logging_first_step=True,
        save_strategy="no",
        report_to=[],
        max_length=max_length,
        seed=seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
        **no_activation_checkpointing(),
    )


def _lora_model(
    base: LatentModel, r: int, lora_alpha: int, train_embeddings: bool, init_adapter: str | Path | None
) -> tuple[PreTrainedModel, LoraConfig | None]:
    """(model, peft config) for the trainer: a fresh LoRA on every linear layer (config for TRL to apply),
    or the saved adapter at `init_adapter` made trainable again (config None: its own settings hold)."""
    from peft import LoraConfig

    extra = {}
    if train_embeddings:
        tied = bool(getattr(base.model.config, "tie_word_embeddings", False))
        extra = dict(modules_to_save=["embed_tokens", "lm_head"], ensure_weight_tying=tied)
    peft_cfg = LoraConfig(
        r=r,
        lora_alpha=lora_alpha,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
        **extra,
    )
    if init_adapter is None:
        return base.model, peft_cfg
    from peft import PeftModel

    return PeftModel.from_pretrained(base.model, str(init_adapter), is_trainable=True), None


def _run_trainer(
    model: PreTrainedModel,
    args: SFTConfig,
    examples: list[dict],
    tokenizer: PreTrainedTokenizerBase,
    peft_cfg: LoraConfig | None,
    seed: int,
) -> tuple[SFTTrainer, float]:
    """Build TRL's `SFTTrainer` (LoRA initialised from `seed`) and train; returns (trainer, seconds)."""
    import torch
    from datasets import Dataset
    from trl import SFTTrainer

    torch.manual_seed(seed)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        peft_config=peft_cfg,
    )
    t0 = time.perf_counter()
    trainer.train()
    return trainer, time.perf_counter() - t0


def _save_and_merge(trainer: SFTTrainer, out_dir: Path, tokenizer: PreTrainedTokenizerBase) -> LatentModel:
    """Save the adapter under `out_dir/adapter` (what `--resume` and `organism_check` load), then merge
    it into the weights so the studies measure a plain model."""
    from latent import LatentModel

    trainer.save_model(str(out_dir / "adapter"))
    return LatentModel(trainer.model.merge_and_unload().eval(), tokenizer)
