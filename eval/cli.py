"""`latentworks` command line: one entry point, subcommands loaded lazily (so `--help` is instant).

Each subcommand lives in the package that owns it and exposes `add_arguments(parser)` + `run(args) -> int`;
this file only routes. `latentworks family <name> ...` calls `families.<name>.demo.main(argv)`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

# name -> (module with add_arguments/run, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "eval.demo",
        "run single / text_mas / latent_mas on the built-in model and task and print the table",
    ),
    "eval": ("eval.runner_cli", "evaluate methods x graph on a task; resumable JSONL results"),
    "report": ("eval.report", "print the table of a results directory and write plots"),
    "models": ("latent.models_cli", "built-in and pullable real models: list | pull NAME | path NAME"),
    "smoke": (
        "latent.smoke",
        "check the hidden-state interface on a model (prefill, think, generate, hooks)",
    ),
    "dlm": ("finetune.dlm.cli", "Decision Language Model: data | sft | grpo | eval | baselines"),
    "probe": ("probes.cli", "alignment-faking probes and steering experiments: e1 | e2 | e3 | organisms"),
}


def list_families() -> list[str]:
    """Sub-packages of `families/` that ship a demo."""
    import families

    found = []
    for info in pkgutil.iter_modules(families.__path__):
        if info.ispkg and importlib.util.find_spec(f"families.{info.name}.demo") is not None:
            found.append(info.name)
    return sorted(found)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latentworks",
        description="LLM agents that think and talk through hidden states.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.add_argument("argv", nargs=argparse.REMAINDER)
    fam = sub.add_parser(
        "family", help="run a side-module demo: latentworks family <name> [--quick]", add_help=False
    )
    fam.add_argument("argv", nargs=argparse.REMAINDER)
    return parser


def _run_family(argv: list[str]) -> int:
    names = list_families()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: latentworks family <name> [demo args]\n\nfamilies: " + ", ".join(names))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"unknown family {name!r}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    demo = importlib.import_module(f"families.{name}.demo")
    return int(demo.main(rest) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `latentworks` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*SUBCOMMANDS, "family"):
        build_parser().parse_args(argv)  # prints help, or the error for an unknown command
        build_parser().print_help()
        return 0
    command, rest = argv[0], argv[1:]
    if command == "family":
        return _run_family(rest)
    module_name, help_text = SUBCOMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            print(f"`latentworks {command}` is not available in this install ({err}).", file=sys.stderr)
            return 2
        raise
    parser = argparse.ArgumentParser(prog=f"latentworks {command}", description=help_text)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(rest)) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
