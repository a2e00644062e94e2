"""The one dataclass-to-argparse builder (`latent.args`): positionals, switches, required flags,
lazily filled sub-actions, and a command's own options next to its config file."""

import argparse
from dataclasses import dataclass, field

import pytest

from latent.args import (
    ArgumentParser,
    UsageError,
    add_config_arguments,
    add_subcommands,
    config_from_args,
)


@dataclass
class Options:
    target: str = field(metadata={"positional": True, "choices": ("a", "b"), "help": "what to act on"})
    paths: list[str] = field(metadata={"positional": True, "help": "files"})
    name: str = field(metadata={"help": "required: no default"})
    quick: bool = field(default=False, metadata={"help": "a plain switch", "switch": True})
    report: bool = field(default=True, metadata={"help": "--report / --no-report"})
    steps: int = field(default=3, metadata={"help": "how many", "metavar": "N"})

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"`steps` must be >= 1, got {self.steps}")


def _parser() -> ArgumentParser:
    p = ArgumentParser(prog="tool")
    add_config_arguments(p, Options, files=False)
    return p


def test_positionals_switches_and_required_flags():
    args = _parser().parse_args(["b", "x", "y,z", "--name", "n", "--quick", "--no-report", "--steps", "5"])
    assert config_from_args(Options, args, files=False) == Options("b", ["x", "y", "z"], "n", True, False, 5)
    help_text = _parser().format_help()
    assert "--quick " in help_text and "--no-quick" not in help_text and "--no-report" in help_text
    assert "--steps N" in help_text and "{a,b}" in help_text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["c", "x", "--name", "n"], "invalid choice: 'c'"),
        (["a", "x"], "required: --name"),
        (["a", "--name", "n"], "required: paths"),
        (["a", "x", "--name", "n", "--quick=1"], "ignored explicit argument"),
    ],
)
def test_bad_command_lines_are_usage_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        _parser().parse_args(argv)


def test_validation_is_the_dataclass_own():
    args = _parser().parse_args(["a", "x", "--name", "n", "--steps", "0"])
    with pytest.raises(ValueError, match="`steps` must be >= 1"):
        config_from_args(Options, args, files=False)


def test_options_ignore_the_config_file_of_the_command(tmp_path):
    """`files=False` reads flags only: the command's YAML belongs to its config, not to its options."""

    @dataclass
    class Run:
        seed: int = 0

    (tmp_path / "c.yaml").write_text("seed: 4\n")
    p = ArgumentParser(prog="tool")
    add_config_arguments(p, Run)
    add_config_arguments(p, Options, files=False)
    args = p.parse_args(["a", "x", "--name", "n", "--config", str(tmp_path / "c.yaml"), "--set", "seed=5"])
    assert config_from_args(Run, args).seed == 5
    assert config_from_args(Options, args, files=False).name == "n"


def test_sub_actions_are_filled_only_when_chosen():
    filled = []

    def fill(name):
        def add(p: argparse.ArgumentParser) -> None:
            filled.append(name)
            add_config_arguments(p, Options, files=False)

        return add

    def parser() -> ArgumentParser:
        p = ArgumentParser(prog="tool")
        add_subcommands(p, "action", {"one": ("first", fill("one")), "two": ("second", fill("two"))})
        return p

    assert "first" in parser().format_help() and filled == []
    args = parser().parse_args(["two", "a", "x", "--name", "n"])
    assert filled == ["two"] and args.action == "two"
    assert config_from_args(Options, args, files=False).target == "a"
    with pytest.raises(UsageError, match="invalid choice: 'three'"):
        parser().parse_args(["three"])
    with pytest.raises(UsageError, match="required: ACTION"):
        parser().parse_args([])
    with pytest.raises(UsageError, match="tool two --help"):  # a sub-action's error names its own help
        parser().parse_args(["two", "a", "x"])


def test_yaml_aliases_are_allowed_until_they_expand_too_far():
    """Anchors and a few aliases load as usual; a "billion laughs" file is refused in milliseconds."""
    import time

    from latent.args import MAX_YAML_NODES, load_yaml

    assert load_yaml("base: &b {lr: 1}\nrun: *b\n", "config") == {"base": {"lr": 1}, "run": {"lr": 1}}
    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]\n" for k in range(1, 10)
    )
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"more than {MAX_YAML_NODES:,} values"):
        load_yaml(bomb, "config file x.yaml")
    assert time.perf_counter() - start < 1.0


def test_yaml_text_over_the_size_limit_is_refused_unparsed():
    """A YAML text larger than `MAX_YAML_CHARS` is refused before the parser sees it."""
    from latent.args import MAX_YAML_CHARS, load_yaml

    with pytest.raises(ValueError, match="too large"):
        load_yaml("a: " + "x" * MAX_YAML_CHARS, "config file x.yaml")


@pytest.mark.parametrize("command", ["eval", "demo"])
def test_threads_help_states_one_default(command, capsys):
    """`--threads` help says how its default is chosen and what it is here, once, with no contradiction."""
    import re

    from latentworks.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    entry = re.search(r"--threads THREADS (.*?) --", text).group(1)
    assert entry.count("default") == 1 and "None" not in entry, entry
    assert "half this machine's CPUs" in entry
