"""Evaluation runs: methods x graph on a task, one JSONL line per (item, method).

`evaluate` checks the config, the task, the graph and the model, then runs the items batch by batch;
the run's folder (manifest, lock, records, resume) is reached only through `eval.run_state.RunStore`,
and the table at the end is `eval.report`'s (`summary.json`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from agents.handoff import PROMPT_SET as HANDOFF_PROMPTS
from eval.config import EvalConfig
from eval.run_state.records import CONTEXT_OVERFLOW, seal
from eval.run_state.store import RunStore

if TYPE_CHECKING:
    from latent import LatentModel

logger = logging.getLogger(__name__)

# Appended to the question so every method gets the same answer-format instruction.
KIND_INSTRUCTIONS = {
    "math": "",
    "mc": "\n\nAnswer with the letter of the correct option in \\boxed{}.",
    "code": "\n\nWrite the complete Python solution in a single ```python code block.",
}


def check_model(cfg: EvalConfig) -> str:
    """Resolve the model path and check its config, the device and the dtype before anything is
    written or loaded; returns the resolved path. Errors say what to fix."""
    import torch

    from latent.loading import resolve_model_path

    path = resolve_model_path(cfg.model)
    try:
        from transformers import AutoConfig

        if path.endswith(".gguf"):
            AutoConfig.from_pretrained(
                os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path)
            )
        else:
            AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"cannot load model {cfg.model!r} ({first}). Check the name or path") from None
    if cfg.device and cfg.device.startswith("cuda"):
        index = int(cfg.device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ValueError(
                f"device {cfg.device!r} is not available here ({torch.cuda.device_count()} CUDA devices). "
                "Use --device cpu or leave it out"
            )
    if cfg.run.backend == "vllm":
        from agents.vllm_backend import require_vllm

        require_vllm()
    if cfg.device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' is not available here. Use --device cpu or leave it out")
    return path


def _record(item, result, graph: str, task: str, keep_latents: bool) -> dict:
    """One results.jsonl line: the scored answer and the per-agent accounting (`latent_tokens`, the logit
    lens of every latent thought, only when `inspect_latents` asked for it)."""
    from eval.scoring import score

    s = score(item, result.text)
    return {
        "item_id": item.id,
        "method": result.method,
        "graph": graph,
        "task": task,
        "prediction": result.text,
        "extracted": s.extracted,
        "gold": item.gold,
        "correct": bool(s.correct),
        **({} if s.tests_total is None else {"tests_passed": s.tests_passed, "tests_total": s.tests_total}),
        "output_tokens": result.output_tokens,
        "wall_s": result.wall_s,
        "agents": [a.__dict__ | ({} if keep_latents else {"latent_tokens": None}) for a in result.agents],
    }


def _share_groups(batch: list, graph, cfg: EvalConfig):
    """(items, graph, shares) runs of one batch. Items without shares run on `graph`; hand-off items
    (`meta["shares"]`) are grouped by share count and run on `agents.handoff_graph(n)` with kv edges,
    each share read only by its own holder."""
    import agents

    plain = [it for it in batch if "shares" not in it.meta]
    if plain:
        yield plain, graph, None
    counts = sorted({len(it.meta["shares"]) for it in batch if "shares" in it.meta})
    for n in counts:
        group = [it for it in batch if len(it.meta.get("shares", ())) == n and "shares" in it.meta]
        yield group, agents.handoff_graph(n, "kv"), [list(it.meta["shares"]) for it in group]


def _overflow_record(item, method: str, graph: str, task: str, err: Exception, wall_s: float) -> dict:
    """The record of an item whose prompts, latent thoughts and answer do not fit in the model's context:
    scored wrong, with the reason, so a resume does not run it again and the report counts it."""
    return {
        "item_id": item.id,
        "method": method,
        "graph": graph,
        "task": task,
        "prediction": "",
        "extracted": None,
        "gold": item.gold,
        "correct": False,
        "output_tokens": 0,
        "wall_s": max(0.0, wall_s),
        "agents": [],
        "error": CONTEXT_OVERFLOW + str(err),
    }


def _run_group(group: list, g, model: LatentModel, run, shares) -> list:
    """`agents.run` on one share group: a result per item, or for an item that does not fit in the
    model's context, the `ContextOverflow` with the seconds it took. One item running past the context
    stops the whole batch, so such a batch reruns item by item and only the items that overflow alone
    fail."""
    import agents
    from latent.model import ContextOverflow

    def once(items, item_shares):
        questions = [it.question + KIND_INSTRUCTIONS.get(it.kind, "") for it in items]
        if item_shares is not None:
            run_g = replace(run, prompts=HANDOFF_PROMPTS) if run.prompts == "default" else run
            return agents.run(g, model, questions, config=run_g, shares=item_shares)
        return agents.run(g, model, questions, config=run)

    t0 = time.perf_counter()
    try:
        return list(once(group, shares))
    except ContextOverflow as err:
        if len(group) == 1:
            return [(err, time.perf_counter() - t0)]
    out = []
    for i, it in enumerate(group):
        t0 = time.perf_counter()
        try:
            out.append(once([it], None if shares is None else [shares[i]])[0])
        except ContextOverflow as err:
            out.append((err, time.perf_counter() - t0))
    return out


def _batch_records(
    batch: list,
    graph,
    model: LatentModel,
    run,
    cfg: EvalConfig,
    task_name: str,
    run_id: str,
    overflowed: list | None = None,
) -> list[str]:
    """One method over one batch: the sealed JSON record lines, in batch order per share group. An item
    that runs past the model's context is recorded as a failure with the reason (and appended to
    `overflowed` as (item id, method)); any other error stops the run."""
    lines = []
    for group, g, shares in _share_groups(batch, graph, cfg):
        res = _run_group(group, g, model, run, shares)
        keep = cfg.run.inspect_latents > 0
        for it, r in zip(group, res):
            if isinstance(r, tuple):  # (ContextOverflow, seconds)
                rec = _overflow_record(it, run.method, graph.name, task_name, *r)
                if overflowed is not None:
                    overflowed.append((it.id, run.method))
            else:
                rec = _record(it, r, graph.name, task_name, keep)  # `graph`: the run's, which resume checks
            rec["item_graph"] = g.name  # the per-item holder graph a hand-off item ran on
            lines.append(json.dumps(seal(rec, run_id)))
    return lines


def evaluate(cfg: EvalConfig) -> Path:
    """Run (or resume) the evaluation; returns the output directory.

    Order: validate (config, task, graph, prompts, model path, device) -> check an existing --out
    (read-only) -> load the model -> write the manifest -> run. A failed check writes nothing, so the
    corrected retry is never refused.
    """
    import agents
    from eval.report import write_summary
    from eval.tasks import load_task
    from latent import load_model

    store = RunStore(cfg)
    store.check()
    task = load_task(cfg.task, data=cfg.data, limit=cfg.limit, seed=cfg.run.seed)
    if task.kind == "code":  # the sandbox can import what the tests import, or one clear error now
        from eval.sandbox.code_verdict import canary_items

        canary_items(task.items)
    graph = agents.Graph.resolve(cfg.graph)
    model_path = check_model(cfg)
    if task.kind == "math":  # the symbolic helper's import (seconds) overlaps the model load
        from eval.scoring.symbolic import prestart

        prestart()
    rank, world = store.rank, store.world
    done = store.resume(task, graph.name, model_path)
    # Batches of similar question length: left padding costs every method prefill compute; the answers do
    # not depend on the batch a question sits in (tested in tests/agents/test_latentmas.py).
    mine = sorted(task.items[rank::world], key=lambda it: len(it.question))
    total = sum((it.id, m) not in done for m in cfg.methods for it in mine)
    if total == 0:
        store.release()
        logger.info("nothing left to run in %s", store.out)
        return store.out
    if cfg.run.threads is not None:
        import torch

        torch.set_num_threads(cfg.run.threads)
    model = load_model(
        cfg.model,
        dtype=cfg.dtype,
        device=cfg.device,
        realign=cfg.realign,
        attn_implementation=cfg.attn_implementation,
        device_map=cfg.device_map,
    )
    run_id = store.start(task, graph.name, model_path, str(model.dtype).removeprefix("torch."))
    overflowed: list[tuple[str, str]] = []
    bar = _progress_bar(cfg, total, rank, world)
    with store.appending() as append:  # the lock: a second writer is refused
        # Batches outside, methods inside: every method sees the same machine load at about the same
        # time, so per-item times of different methods compare fairly even on a shared machine.
        for start in range(0, len(mine), cfg.run.batch_size):
            for method in cfg.methods:
                batch = [it for it in mine[start : start + cfg.run.batch_size] if (it.id, method) not in done]
                if not batch:
                    continue
                run = replace(cfg.run, method=method, seed=cfg.run.seed + start, progress=False)
                append(_batch_records(batch, graph, model, run, cfg, task.name, run_id, overflowed))
                if bar is not None:
                    bar.update(len(batch))
    if bar is not None:
        bar.close()
    _warn_overflow(overflowed)
    if world == 1:
        write_summary(store.out)
    return store.out


def _progress_bar(cfg: EvalConfig, total: int, rank: int, world: int):
    """A bar over the items left to run (None without --progress)."""
    if not cfg.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"eval {cfg.task}" + (f" [rank {rank}]" if world > 1 else ""), unit="item")


def _warn_overflow(overflowed: list[tuple[str, str]]) -> None:
    """One warning line for the items recorded as context overflows, counted per method."""
    if not overflowed:
        return
    per = ", ".join(
        f"{m} {sum(m == k for _, k in overflowed)}" for m in dict.fromkeys(m for _, m in overflowed)
    )
    logger.warning(
        "%d item(s) ran past the model's context (%s) and are recorded as failures with the reason; "
        "the rest of the run was scored. Shorten the prompts, or lower --latent-steps / --max-new-tokens, "
        "or use a model with a longer context to score them",
        len(overflowed),
        per,
    )
