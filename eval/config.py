"""`EvalConfig`: one evaluation run, holding the `RunConfig` that `agents.run` executes.

Everything that can be checked without loading a model is checked in `__post_init__` (methods, task,
`--data`, graph file, prompt set and roles, dtype and device names, output directory), so a bad run
fails before anything is written. Importing this module does not import torch.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.config import DEFAULT_THINKING_BUDGET, METHODS, RunConfig

DTYPES = ("float32", "bfloat16", "float16")
# latent.realign.REALIGN, restated so that `--help` imports no torch (a test keeps them equal)
REALIGN = ("ridge", "identity", "soft")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
GENERATED_TASKS = ("arith", "rg:")  # tasks made by a generator: `data` has no meaning for them
# Fields that define a run: a resumed run must agree on all of them (the rest only change speed).
IDENTITY_FIELDS = ("model", "task", "data", "methods", "graph", "limit")
RUN_IDENTITY_FIELDS = ("latent_steps", "max_new_tokens", "do_sample", "temperature", "top_p", "seed")
RUN_IDENTITY_FIELDS += ("prompts", "backend", "thoughts")
# Upper bounds no real run reaches; past them a value is a typo that would exhaust memory (a generated
# task builds every item up front) or overflow a tensor index deep inside generation.
MAX_LIMIT = 100_000
MAX_NEW_TOKENS = 1_000_000
MAX_LATENT_STEPS = 10_000
MAX_INSPECT_LATENTS = 1_000


def usable_cpus() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def text_file_problem(path: str, what: str, flag: str) -> str | None:
    """Why `path` (given to `flag`) cannot be read as a UTF-8 text file, or None if it can (or is absent)."""
    p = Path(path)
    if p.is_dir():
        return f"{what} {path!r} is a directory; pass a file to {flag}"
    if not p.is_file():
        return None
    try:
        p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        return (
            f"{what} {path!r} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "save it as UTF-8"
        )
    except OSError as err:
        return f"cannot read {what} {path!r} ({err.strerror}); check the file"
    return None


def fresh_out_dir(task: str) -> str:
    """`runs/eval-<task>-<YYYYmmdd-HHMMSS>`: a new directory per run, so a retry is never refused."""
    return time.strftime(f"runs/eval-{re.sub(r'[^A-Za-z0-9_.-]', '_', task)}-%Y%m%d-%H%M%S")


@dataclass
class EvalConfig:
    """One evaluation run. The CLI flags are built from these fields and from `run`'s."""

    # What to evaluate
    model: str = field(default="builtin:arith-mini", metadata={"help": "path, hub id or builtin:<name>"})
    task: str = field(default="arith", metadata={"help": "task name (see `latentworks eval --list-tasks`)"})
    data: str | None = field(
        default=None, metadata={"help": "local JSON/JSONL/parquet file for a hub task (not for arith, rg:*)"}
    )
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": "comma-separated"})
    graph: str = field(default="sequential", metadata={"help": "sequential | hierarchical | graph file"})
    limit: int | None = field(default=None, metadata={"help": "first N items"})
    # How (method, decoding, batching, threads): every RunConfig field but `method` and `progress`
    run: RunConfig = field(default_factory=RunConfig)
    dtype: str | None = field(default=None, metadata={"help": "float32 | bfloat16 | float16"})
    device: str | None = field(default=None, metadata={"help": "cpu | cuda | cuda:N | mps"})
    device_map: str | None = field(
        default=None,
        metadata={
            "help": "spread the model's layers over several GPUs (instead of --device)",
            "choices": DEVICE_MAPS,
        },
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "sdpa | eager | flash_attention_2 | ... (default: transformers' sdpa); flash attention is "
            "refused for sliding-window models"
        },
    )
    realign: str = field(
        default="ridge",
        metadata={
            "help": "latent thoughts' realignment: ridge (the least-squares map from output to input "
            "embeddings, then the norm rescale), identity (the norm rescale only) or soft (the input embedding "
            "averaged over the thought's next-token distribution; not the paper's method)",
            "choices": list(REALIGN),
        },
    )
    # Where
    out: str | None = field(
        default=None, metadata={"help": "output directory (default: a fresh runs/eval-*)"}
    )
    resume: bool = field(default=False, metadata={"help": "continue a stopped run in --out"})
    overwrite: bool = field(default=False, metadata={"help": "replace the run already in --out"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        if isinstance(self.methods, str):
            self.methods = [m.strip() for m in self.methods.split(",") if m.strip()]
        if isinstance(self.run, dict):
            self.run = RunConfig(**self.run)
        self.dtype = _DTYPE_ALIASES.get(self.dtype, self.dtype)
        problems = self._problems()
        if problems:
            raise ValueError("invalid eval config: " + "; ".join(problems) + ".")
        if self.out is None:
            self.out = fresh_out_dir(self.task)
        self._check_graph_and_prompts()

    def _problems(self) -> list[str]:
        from eval.tasks import list_tasks

        problems = []
        if not isinstance(self.model, str) or not self.model.strip():
            problems.append(
                f"`model` must be a path, hub id or builtin:<name>, got {self.model!r}; pass --model"
            )
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            problems.append(f"`methods` must be a non-empty subset of {METHODS}, got {self.methods}")
        twice = sorted({m for m in self.methods if self.methods.count(m) > 1})
        if twice and not bad:  # every item would be run and recorded twice per listed copy
            problems.append(f"`methods` lists {', '.join(twice)} more than once; list each method once")
        if self.limit is not None and self.limit < 1:
            problems.append(f"`limit` must be >= 1 (empty selection), got {self.limit}")
        elif self.limit is not None and self.limit > MAX_LIMIT:
            problems.append(
                f"`limit` must be <= {MAX_LIMIT:,} items, got {self.limit:,}; pass a smaller --limit"
            )
        problems += self._run_problems() + self._out_problems() + self._file_problems()
        if self.task not in list_tasks() and not self.task.startswith("rg:"):
            problems.append(
                f"unknown task {self.task!r}; known tasks: {', '.join(list_tasks())} (rg:<name> takes any "
                "reasoning_gym dataset)"
            )
        if self.data is not None and self.task.startswith(GENERATED_TASKS):
            problems.append(f"`data` does not apply to the generated task {self.task!r}; drop --data")
        elif self.data is not None and not Path(self.data).exists():
            problems.append(f"no data file at {self.data!r}; check the path")
        if self.dtype is not None and self.dtype not in DTYPES:
            problems.append(f"`dtype` must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.realign not in REALIGN:
            problems.append(f"`realign` must be one of {', '.join(REALIGN)}, got {self.realign!r}")
        if self.device is not None and not re.fullmatch(r"cpu|mps|cuda(:\d+)?", self.device):
            problems.append(f"`device` must be cpu, cuda, cuda:N or mps, got {self.device!r}")
        if self.device_map is not None and self.device is not None:
            problems.append("pass --device (one device) or --device-map (layers over several), not both")
        from latent.attention import attention_problem

        attention = attention_problem(self.attn_implementation, device=self.device)
        if attention:
            problems.append(attention)
        if self.resume and self.overwrite:
            problems.append("pass --resume (continue the run in --out) or --overwrite (replace it), not both")
        if self.resume and self.out is None:
            problems.append("--resume needs --out DIR: the directory of the run to continue")
        return problems

    def _run_problems(self) -> list[str]:
        """Decoding values `RunConfig` lets through that no run can use (NaN, huge counts)."""
        run, problems = self.run, []
        if run.max_new_tokens > MAX_NEW_TOKENS:
            problems.append(
                f"`max_new_tokens` must be <= {MAX_NEW_TOKENS:,}, got {run.max_new_tokens:,}; "
                "pass a smaller --max-new-tokens"
            )
        if run.latent_steps > MAX_LATENT_STEPS:
            problems.append(
                f"`latent_steps` must be <= {MAX_LATENT_STEPS:,}, got {run.latent_steps:,}; "
                "pass a smaller --latent-steps"
            )
        if run.inspect_latents > MAX_INSPECT_LATENTS:
            problems.append(
                f"`inspect_latents` must be <= {MAX_INSPECT_LATENTS:,} (top tokens kept per thought), got "
                f"{run.inspect_latents:,}; pass a smaller --inspect-latents"
            )
        for name in ("temperature", "top_p"):
            value = getattr(run, name)
            if not math.isfinite(value):
                problems.append(f"`{name}` must be a finite number, got {value}; pass a number such as 0.7")
        if run.threads is not None and run.threads > usable_cpus():
            problems.append(
                f"`threads` must be at most the CPU cores here ({usable_cpus()}), got {run.threads:,}; "
                "pass a smaller --threads"
            )
        return problems

    def _out_problems(self) -> list[str]:
        """An --out that cannot be a run directory: empty, a file, or under a file."""
        if self.out is None:
            return []
        if not isinstance(self.out, str) or not self.out.strip():
            return [f"`out` must name a directory, got {self.out!r}; pass --out DIR or leave it out"]
        p = Path(self.out)
        if p.exists() and not p.is_dir():
            return [f"--out {self.out!r} is a file, not a directory; pass a directory"]
        blocking = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
        if blocking is not None:
            return [f"--out {self.out!r} lies under the file {str(blocking)!r}; pass a directory"]
        return []

    def _file_problems(self) -> list[str]:
        """Graph, prompt-set and data files that are directories or not UTF-8 text."""
        checks = []
        if self.graph not in ("sequential", "hierarchical"):
            checks.append((self.graph, "graph file", "--graph"))
        if Path(self.run.prompts).is_file():  # a shipped set's name is not a path
            checks.append((self.run.prompts, "prompt set", "--prompts"))
        if self.data is not None and not self.data.lower().endswith(".parquet"):
            checks.append((self.data, "data file", "--data"))
        found = (text_file_problem(path, what, flag) for path, what, flag in checks if isinstance(path, str))
        return [why for why in found if why]

    def _check_graph_and_prompts(self) -> None:
        """The graph parses, and the prompt set has a system prompt for every agent's role."""
        from agents.graph import Graph
        from agents.prompts import PromptSet

        graph = Graph.resolve(self.graph)
        prompts = PromptSet.load(self.run.prompts)
        missing = [f"{a.name!r} ({a.role})" for a in graph.agents if a.role not in prompts.system]
        if missing:
            raise ValueError(
                f"prompt set {self.run.prompts!r} has no system prompt for agents {', '.join(missing)}; "
                f"its roles: {sorted(prompts.system)}. Add the roles or pick another --prompts."
            )

    def identity(self) -> dict:
        """The fields a resumed run must share with the run it continues."""
        from agents.graph import Graph

        ident = {k: getattr(self, k) for k in IDENTITY_FIELDS}
        # what the graph name stands for: a preset's edges or a graph file's content may change
        ident["graph_edges"] = Graph.resolve(self.graph).edge_list()
        if self.realign != "ridge":  # absent from runs made before the option existed, which used ridge
            ident["realign"] = self.realign
        if self.run.enable_thinking is not None:  # likewise: runs made before left the template's default
            ident["enable_thinking"] = self.run.enable_thinking
        if self.run.thinking_budget != DEFAULT_THINKING_BUDGET:
            ident["thinking_budget"] = self.run.thinking_budget
        return ident | {k: getattr(self.run, k) for k in RUN_IDENTITY_FIELDS}
