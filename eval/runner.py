"""Resumable evaluation runs: methods x graph on a task, one JSONL line per (item, method).

Layout of an output directory:
    manifest.json          the run's identity: config, seed, task source, package versions, model fingerprint
    results.jsonl          (or results.rank<R>.jsonl per process) appended and flushed after every batch

A killed run resumes with `resume=True`: every valid line is kept, unreadable lines (a torn last
write, a corrupted byte) move to `results.jsonl.quarantine`, and only missing (item, method) pairs
run; a resume whose model weights or dtype changed is refused (`eval.results_store`). One process
at a time writes a results file (a lock). A directory holding another run's manifest is never
overwritten. Processes launched by `accelerate launch` (or `torchrun`) each take every N-th item and
write their own file; `eval.report` merges them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agents.latentmas import DEFAULT_LATENT_STEPS, METHODS
from eval.results_store import check_resume, open_for_append, read_done, release

logger = logging.getLogger(__name__)

# Appended to the question so every method gets the same answer-format instruction.
KIND_INSTRUCTIONS = {
    "math": "",
    "mc": "\n\nAnswer with the letter of the correct option in \\boxed{}.",
    "code": "\n\nWrite the complete Python solution in a single ```python code block.",
}
# Fields that define a run: a resumed run must agree on all of them.
IDENTITY_FIELDS = (
    "model",
    "task",
    "data",
    "methods",
    "graph",
    "limit",
    "latent_steps",
    "max_new_tokens",
    "do_sample",
    "temperature",
    "top_p",
    "seed",
    "prompts",
)


@dataclass
class EvalConfig:
    """One evaluation run. The CLI flags are built from these fields."""

    # What to evaluate
    model: str = field(default="builtin:arith-mini", metadata={"help": "path, hub id or builtin:<name>"})
    task: str = field(default="arith", metadata={"help": "task name (see `latentworks eval --list-tasks`)"})
    data: str | None = field(default=None, metadata={"help": "local JSON/JSONL/parquet file for the task"})
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": "comma-separated"})
    graph: str = field(default="sequential", metadata={"help": "sequential | hierarchical | graph file"})
    limit: int | None = field(default=None, metadata={"help": "first N items"})
    # How
    batch_size: int = field(default=8, metadata={"help": "questions per batch"})
    latent_steps: int = field(default=DEFAULT_LATENT_STEPS, metadata={"help": "latent thoughts per agent"})
    max_new_tokens: int = field(default=256, metadata={"help": "decode budget per decoding agent"})
    do_sample: bool = field(default=False, metadata={"help": "sample instead of greedy"})
    temperature: float = field(default=0.6, metadata={"help": "sampling temperature"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling"})
    seed: int = field(default=0, metadata={"help": "task generation and sampling seed"})
    prompts: str = field(default="default", metadata={"help": "prompt set name or YAML path"})
    dtype: str | None = field(default=None, metadata={"help": "float32 | bfloat16 | float16"})
    device: str | None = field(default=None, metadata={"help": "cpu | cuda | cuda:N"})
    # Where
    out: str = field(default="runs/eval", metadata={"help": "output directory"})
    resume: bool = field(default=False, metadata={"help": "continue a killed run in --out"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        if isinstance(self.methods, str):
            self.methods = [m.strip() for m in self.methods.split(",") if m.strip()]
        problems = []
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            problems.append(f"`methods` must be a non-empty subset of {METHODS}, got {self.methods}")
        if self.limit is not None and self.limit < 1:
            problems.append(f"`limit` must be >= 1 (empty selection), got {self.limit}")
        if self.batch_size < 1:
            problems.append(f"`batch_size` must be >= 1, got {self.batch_size}")
        if self.latent_steps < 0:
            problems.append(f"`latent_steps` must be >= 0, got {self.latent_steps}")
        if problems:
            raise ValueError("invalid eval config: " + "; ".join(problems) + ".")

    def identity(self) -> dict:
        return {k: getattr(self, k) for k in IDENTITY_FIELDS}


def shard() -> tuple[int, int]:
    """(rank, world size) from accelerate/torchrun environment variables; (0, 1) when alone."""
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", 0)))
    world = int(os.environ.get("WORLD_SIZE", 1))
    return rank, world


def model_fingerprint(path: str) -> str:
    """sha256 over config.json and each weight file's size + first and last MiB (cheap for 100 GB models)."""
    h = hashlib.sha256()
    p = Path(path)
    if not p.is_dir():
        return f"hub:{path}"
    for f in sorted(p.iterdir()):
        if f.name == "config.json" or f.suffix in (".safetensors", ".bin"):
            h.update(f.name.encode())
            h.update(str(f.stat().st_size).encode())
            with open(f, "rb") as fh:
                h.update(fh.read(1 << 20))
                if f.stat().st_size > 2 << 20:
                    fh.seek(-(1 << 20), os.SEEK_END)
                    h.update(fh.read())
    return h.hexdigest()[:16]


def _versions() -> dict:
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def prepare_out_dir(cfg: EvalConfig, task_source: str, model_path: str) -> Path:
    """Create or validate the output directory; returns it. Never overwrites another run."""
    out = Path(cfg.out)
    manifest_file = out / "manifest.json"
    rank, world = shard()
    if rank > 0:  # rank 0 writes the manifest; the others wait for it, then validate it like a resume
        deadline = time.time() + 600
        while not manifest_file.is_file() and time.time() < deadline:
            time.sleep(0.2)
    if manifest_file.is_file():
        old = json.loads(manifest_file.read_text())
        if old.get("identity") != cfg.identity():
            diff = sorted(k for k in cfg.identity() if old.get("identity", {}).get(k) != cfg.identity()[k])
            raise ValueError(
                f"{out} holds a different run's manifest (differs in {diff}); nothing was overwritten. "
                "Choose a new --out directory."
            )
        if not cfg.resume and rank == 0 and any(out.glob("results*.jsonl")):
            raise ValueError(
                f"{out} already holds results of this run: pass --resume to continue it, "
                "or choose a new --out directory."
            )
        check_resume(manifest_file, asdict(cfg), model_fingerprint(model_path), record=rank == 0)
        return out
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "identity": cfg.identity(),
        "config": asdict(cfg),
        "task_source": task_source,
        "model_fingerprint": model_fingerprint(model_path),
        "versions": _versions(),
        "world_size": world,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    tmp = manifest_file.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, manifest_file)  # atomic: a crash never leaves half a manifest
    return out


def evaluate(cfg: EvalConfig) -> Path:
    """Run (or resume) the evaluation; returns the output directory."""
    import agents
    from eval.scoring import score
    from eval.tasks import load_task
    from latent import load_model
    from latent.loading import _resolve

    task = load_task(cfg.task, data=cfg.data, limit=cfg.limit, seed=cfg.seed)
    graph = agents.Graph.resolve(cfg.graph)  # validates before the model loads
    out = prepare_out_dir(cfg, task.source, _resolve(cfg.model))
    rank, world = shard()
    results_file = out / ("results.jsonl" if world == 1 else f"results.rank{rank}.jsonl")
    done = read_done(results_file)
    mine = task.items[rank::world]
    total = sum((it.id, m) not in done for m in cfg.methods for it in mine)
    if total == 0:
        release(results_file)
        logger.info("nothing left to run in %s", out)
        return out
    model = load_model(cfg.model, dtype=cfg.dtype, device=cfg.device)
    bar = None
    if cfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total, desc=f"eval {cfg.task}" + (f" [rank {rank}]" if world > 1 else ""), unit="item"
        )
    with open_for_append(results_file) as fh:  # the lock: a second writer is refused
        # Batches outside, methods inside: every method sees the same machine load at about the same
        # time, so per-item times of different methods compare fairly even on a shared machine.
        for start in range(0, len(mine), cfg.batch_size):
            for method in cfg.methods:
                batch = [it for it in mine[start : start + cfg.batch_size] if (it.id, method) not in done]
                if not batch:
                    continue
                questions = [it.question + KIND_INSTRUCTIONS.get(it.kind, "") for it in batch]
                res = agents.run(
                    graph,
                    model,
                    questions,
                    method=method,
                    latent_steps=cfg.latent_steps,
                    max_new_tokens=cfg.max_new_tokens,
                    batch_size=cfg.batch_size,
                    do_sample=cfg.do_sample,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    seed=cfg.seed + start,
                    prompts=cfg.prompts,
                )
                for it, r in zip(batch, res):
                    s = score(it, r.text)
                    rec = {
                        "item_id": it.id,
                        "method": method,
                        "graph": graph.name,
                        "task": task.name,
                        "prediction": r.text,
                        "extracted": s.extracted,
                        "gold": it.gold,
                        "correct": bool(s.correct),
                        **(
                            {}
                            if s.tests_total is None
                            else {"tests_passed": s.tests_passed, "tests_total": s.tests_total}
                        ),
                        "output_tokens": r.output_tokens,
                        "wall_s": r.wall_s,
                        "agents": [a.__dict__ | {"latent_tokens": None} for a in r.agents],
                    }
                    fh.write(json.dumps(rec) + "\n")
                fh.flush()
                os.fsync(fh.fileno())  # a crash after this point loses nothing of this batch
                if bar is not None:
                    bar.update(len(batch))
    if bar is not None:
        bar.close()
    return out
