"""`latentworks` command line: one entry point routing to subcommands that load lazily.

Each subcommand lives in the package that owns it and exposes `add_arguments(parser)` + `run(args)`;
its flags come from its config dataclass through `latent.args`. `--help` and listing import
nothing heavy (no torch). Every user mistake ends as `error: <what>. <fix>` with exit status 2, a
subcommand whose extra is not installed names the `pip install` line, and Ctrl-C says how to continue.
`latentworks family <name> ...` calls `families.<name>.demo.main(argv)`.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from latent.entry import (
    EXTRAS,
    ArgumentParser,
    UsageError,
    add_logging_flags,
    install_line,
    run_command,
)
from latent.floors import PACKAGES
from latentworks import __version__

__all__ = ["COMMANDS", "list_families", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand, named by module path so `latentworks --help` lists it without importing it (the
    module and its torch load only when the command runs)."""

    module: str  # has add_arguments(parser) and run(args) -> int
    help: str
    extra: str | None = None  # the `pip install "latentworks[<extra>]"` this command needs


COMMANDS: dict[str, Command] = {
    "demo": Command("eval.demo", "single / text_mas / latent_mas on the built-in model and task, as a table"),
    "eval": Command("eval.runner_cli", "evaluate methods x graph on a task; resumable JSONL results"),
    "report": Command("eval.report", "print the table of a results directory and write report.md"),
    "models": Command("latent.models_cli", "built-in and pullable real models: list | pull NAME | path NAME"),
    "smoke": Command(
        "latent.smoke", "check the hidden-state interface on a model (prefill, think, generate)"
    ),
    "dlm": Command(
        "finetune.dlm.cli", "Decision Language Model: data | sft | grpo | eval | baselines", "dlm"
    ),
    "probe": Command(
        "probes.cli", "alignment-faking probes and steering: e1 | e2 | e3 | organisms", "probes"
    ),
    "finetune": Command(
        "finetune.cli", "fine-tuning: builtin (train from scratch) | mas (the thought channel)", "train"
    ),
    "serve": Command("serve.cli", "agent graphs behind an OpenAI-compatible endpoint, batched", "serve"),
}
FAMILY_HELP = "run a side-module demo: latentworks family <name> [--quick]"
CHECKED = {
    "probes": EXTRAS["probes"],
    "dlm": ("trl", "datasets", "scipy"),
    "train": EXTRAS["train"],
    "serve": EXTRAS["serve"],
}  # needed by every stage / recipe
logger = logging.getLogger("latentworks")


def _missing(names: Sequence[str]) -> list[str]:
    """The modules of `names` that are not installed, found without importing them (imports are slow)."""
    return [n for n in names if importlib.util.find_spec(n) is None]


# ----------------------------------------------------------------------------- families
def _families_dir() -> Path:
    """Where `families/` lives, found through its spec so the lookup imports nothing."""
    return Path(importlib.util.find_spec("families").origin).parent


def list_families() -> list[str]:
    """Sub-packages of `families/` that ship a demo (found on disk: nothing is imported)."""
    root = _families_dir()
    return sorted(p.parent.name for p in root.glob("*/demo.py") if (p.parent / "__init__.py").is_file())


def _first_doc_line(path: Path) -> str:
    """A file's one-line summary for `latentworks family --help`, read with ast so no demo is imported."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _family_imports(name: str) -> list[str]:
    """Third-party top-level modules a family's files import (read with ast, not imported)."""
    found: set[str] = set()
    for f in (_families_dir() / name).rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return sorted(found - set(PACKAGES) - set(sys.stdlib_module_names))


def _run_family(argv: list[str]) -> int:
    """`latentworks family <name> ...`: checks the [families] extra before importing the demo, so a missing
    package ends as an install line rather than an ImportError."""
    names = list_families()
    if not argv or argv[0] in ("-h", "--help"):
        rows = [f"  {n:<20} {_first_doc_line(_families_dir() / n / 'demo.py')[:90]}" for n in names]
        print("usage: latentworks family <name> [demo flags]  (each needs the [families] extra)\n")
        print("families:\n" + "\n".join(rows))
        print(f"\nlatentworks family <name> --help lists a demo's flags. Install: {install_line('families')}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        raise UsageError(f"unknown family {name!r}; available: {', '.join(names)}. Check the name")
    missing = _missing(_family_imports(name))
    if missing:
        message = (
            f"`latentworks family {name}` needs the [families] extra (missing here: {', '.join(missing)}). "
            f"Install it: {install_line('families')}"
        )
        if "-h" in rest or "--help" in rest:
            print(f"usage: latentworks family {name} [--quick] [--seeds N] [--out DIR]\n\n{message}")
            return 0
        raise UsageError(message)
    demo = importlib.import_module(f"families.{name}.demo")
    try:
        return int(demo.main(rest) or 0)
    except SystemExit as stop:  # argparse inside the demo: --help (0) or a usage error (2)
        return int(stop.code or 0) if not isinstance(stop.code, str) else 2


# ----------------------------------------------------------------------------- routing
def build_parser() -> ArgumentParser:
    """The top-level parser: lists every subcommand with its help line but none of their flags, which
    each subcommand adds only when it is chosen (so `latentworks --help` stays instant)."""
    parser = ArgumentParser(
        prog="latentworks",
        description="LLM agents that think and talk through hidden states.",
        epilog="`latentworks COMMAND --help` shows a command's flags. -v / -q work after the command too.",
    )
    parser.add_argument("--version", action="version", version=f"latentworks {__version__}")
    add_logging_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, cmd in COMMANDS.items():
        sub.add_parser(name, help=cmd.help + (f" [{cmd.extra} extra]" if cmd.extra else ""), add_help=False)
    sub.add_parser("family", help=FAMILY_HELP + " [families extra]", add_help=False)
    return parser


def _subcommand_parser(name: str, cmd: Command, wants_help: bool) -> tuple[ArgumentParser, object]:
    """Import one subcommand and build its parser. A missing extra is a usage error naming the install
    line, except under `--help`, which still shows the flags with that line as epilog."""
    missing = _missing(CHECKED.get(cmd.extra, ()))
    epilog = None
    if missing:
        epilog = (
            f"needs the [{cmd.extra}] extra (missing here: {', '.join(missing)}). "
            f"Install it: {install_line(cmd.extra)}"
        )
        if not wants_help:
            raise UsageError(f"`latentworks {name}` {epilog}")
    module = importlib.import_module(cmd.module)
    parser = ArgumentParser(
        prog=f"latentworks {name}",
        description=cmd.help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    add_logging_flags(parser)
    return parser, module


def _dispatch(command: str, rest: list[str]) -> int:
    """Parse `rest` with the chosen subcommand's own parser and run it; `args.argv_` keeps the raw flags
    so an interrupted run can print the exact command that resumes it."""
    if command == "family":
        return _run_family(rest)
    cmd = COMMANDS[command]
    wants_help = "-h" in rest or "--help" in rest
    parser, module = _subcommand_parser(command, cmd, wants_help)
    args = parser.parse_args(rest)
    args.argv_ = rest
    return int(module.run(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `latentworks` console script (and `python -m latentworks`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = next((a for a in argv if not a.startswith("-")), "")
    return run_command(argv, _route, extra=COMMANDS[name].extra if name in COMMANDS else "families")


def _route(argv: list[str]) -> int:
    """Find the subcommand by hand (the first word that is not a flag; -v/-q are already taken out) rather
    than with argparse subparsers, which would need every subcommand's flags, and so its imports, up front."""
    command = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if command is None or argv[command] not in (*COMMANDS, "family"):
        build_parser().parse_args(argv)  # --version, --help, or the error for an unknown command
        build_parser().print_help()
        return 0
    return _dispatch(argv[command], argv[command + 1 :])


if __name__ == "__main__":
    raise SystemExit(main())
