"""`latentworks eval`: flags built from `EvalConfig` (one dataclass behind the CLI and the Python API)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from eval.runner import EvalConfig, evaluate


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One `--flag` per dataclass field, typed from the field's default."""
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        help_text = f.metadata.get("help", "")
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif isinstance(default, list):
            parser.add_argument(flag, default=",".join(default), help=f"{help_text} (default: %(default)s)")
        elif default is None:
            kind = int if f.name in ("limit",) else str
            parser.add_argument(flag, type=kind, default=None, help=help_text)
        else:
            parser.add_argument(
                flag, type=type(default), default=default, help=f"{help_text} (default: %(default)s)"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(parser, EvalConfig)
    parser.add_argument("--list-tasks", action="store_true", help="list the known tasks and exit")
    parser.add_argument("--no-report", action="store_true", help="do not print the table at the end")


def run(args: argparse.Namespace) -> int:
    if args.list_tasks:
        from eval.tasks import list_tasks

        print("\n".join(list_tasks()))
        return 0
    names = {f.name for f in dataclasses.fields(EvalConfig)}
    try:
        cfg = EvalConfig(**{k: v for k, v in vars(args).items() if k in names})
        out = evaluate(cfg)
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from eval.runner import shard

    if not args.no_report and shard()[1] == 1:
        from eval.report import print_report

        print_report(out)
    print(f"results in {out}")
    return 0
