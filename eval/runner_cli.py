"""`latentworks eval`: flags built from `EvalConfig` and its `RunConfig` by the one builder."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from eval.config import EvalConfig
from latent.args import add_config_arguments, config_from_args

# `method` comes from --methods; the eval progress bar replaces the per-batch one of `agents.run`
SKIPPED = ("run.method", "run.progress")


@dataclass
class EvalOptions:
    """What `latentworks eval` does around the run (not part of the run's manifest)."""

    list_tasks: bool = field(
        default=False, metadata={"help": "list the known tasks and exit", "switch": True}
    )
    report: bool = field(default=True, metadata={"help": "print the table at the end"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EvalConfig, flatten=("run",), skip=SKIPPED)
    add_config_arguments(parser, EvalOptions, files=False)


def resume_command(argv: list[str], out: str) -> str:
    """The command line that continues this run: the same flags, its --out, and --resume."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--out", "--overwrite", "--resume") or a.startswith("--out="):
            skip = a == "--out"
        else:
            kept.append(a)
    return shlex.join(["latentworks", "eval", *kept, "--out", out, "--resume"])


def run(args: argparse.Namespace) -> int:
    opts = config_from_args(EvalOptions, args, files=False)
    if opts.list_tasks:
        from eval.tasks import list_tasks

        print("\n".join(list_tasks()))
        return 0
    cfg = config_from_args(EvalConfig, args)
    from latent.entry import on_interrupt

    on_interrupt(
        f"finished batches are in {cfg.out}; continue with:\n  {resume_command(args.argv_, cfg.out)}"
    )
    from eval.run_state.store import shard
    from eval.runner import evaluate

    out = evaluate(cfg)
    if opts.report and shard()[1] == 1:
        from eval.report import print_report

        print_report(out)
    print(f"results in {out}")
    return 0
