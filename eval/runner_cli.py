"""`latentworks eval`: flags built from `EvalConfig` and its `RunConfig` by the one builder."""

from __future__ import annotations

import argparse
import shlex

from eval.config import EvalConfig
from latentworks.args import add_config_arguments, config_from_args

# `method` comes from --methods; the eval progress bar replaces the per-batch one of `agents.run`
SKIPPED = ("run.method", "run.progress")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EvalConfig, flatten=("run",), skip=SKIPPED)
    parser.add_argument("--list-tasks", action="store_true", help="list the known tasks and exit")
    parser.add_argument("--no-report", action="store_true", help="do not print the table at the end")


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
    if args.list_tasks:
        from eval.tasks import list_tasks

        print("\n".join(list_tasks()))
        return 0
    cfg = config_from_args(EvalConfig, args)
    from latentworks.cli import on_interrupt

    on_interrupt(
        f"finished batches are in {cfg.out}; continue with:\n  {resume_command(args.argv_, cfg.out)}"
    )
    from eval.runner import evaluate, shard

    out = evaluate(cfg)
    if not args.no_report and shard()[1] == 1:
        from eval.report import print_report

        print_report(out)
    print(f"results in {out}")
    return 0
