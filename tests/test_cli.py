"""The `latentworks` entry point: help lists every subcommand, routing works, families are found."""

import subprocess
import sys

from eval.cli import SUBCOMMANDS, list_families, main


def test_help_lists_every_subcommand():
    """`latentworks --help` names each subcommand (in a fresh process, as a user runs it)."""
    out = subprocess.run(
        [sys.executable, "-m", "eval", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in [*SUBCOMMANDS, "family"]:
        assert name in out


def test_models_lists_builtins_as_json(capsys):
    """`latentworks models --json` prints the shipped checkpoints with their card fields."""
    import json

    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["name"].startswith("builtin:") and r["size_bytes"] > 0 for r in rows)


def test_family_command_lists_and_rejects(capsys):
    """`latentworks family --help` lists the families; an unknown one is an error naming the known."""
    assert main(["family", "--help"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in list_families())
    assert main(["family", "no-such-family"]) == 2
    assert "available" in capsys.readouterr().err


def test_eval_unknown_task_lists_known(capsys):
    """`latentworks eval --task nope` exits 2 and lists the known tasks."""
    assert main(["eval", "--task", "nope", "--limit", "1", "--out", "/tmp/lw-never-written"]) == 2
    err = capsys.readouterr().err
    assert "unknown task" in err and "gsm8k" in err
