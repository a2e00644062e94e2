"""`latentworks finetune builtin|mas`: help from the one builder, lazy recipe modules,
and bad flags that fail before anything is written or loaded."""

import dataclasses
import subprocess
import sys

import pytest

from finetune import cli as finetune_cli
from latentworks.cli import main


def test_finetune_help_lists_the_recipes_and_imports_no_torch():
    """`latentworks finetune --help` names each recipe without importing any of them (nor torch)."""
    code = (
        "import sys; from latentworks.cli import main; rc = main(['finetune', '--help'])\n"
        "assert 'torch' not in sys.modules and 'finetune.train_builtin' not in sys.modules, 'imported'"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for name in finetune_cli.RECIPES:
        assert name in run.stdout


@pytest.mark.parametrize(
    "recipe, cls_path, extra",
    [
        ("builtin", "finetune.train_builtin:BuiltinConfig", ["--resume", "--tiny"]),
        ("mas", "finetune.thought_channel:ThoughtChannelConfig", []),
    ],
)
def test_every_recipe_field_is_a_flag(recipe, cls_path, extra, capsys):
    import importlib

    module, name = cls_path.split(":")
    cls = getattr(importlib.import_module(module), name)
    with pytest.raises(SystemExit) as stop:
        main(["finetune", recipe, "--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert f"usage: latentworks finetune {recipe}" in help_text
    for flag in ["--" + f.name.replace("_", "-") for f in dataclasses.fields(cls)] + extra + ["--config"]:
        assert flag in help_text, flag


@pytest.mark.parametrize(
    "argv",
    [
        ["builtin", "--max-steps", "0"],
        ["builtin", "--seq-len", "600"],  # longer than max_position_embeddings
        ["builtin", "--nosuch", "1"],
        ["mas", "--aligner", "conv"],
        ["mas", "--stop-at", "9", "--max-steps", "5"],
        ["mas", "--config", "./no/such/recipe.yaml"],
    ],
)
def test_bad_flags_fail_before_anything_is_written(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["finetune", *argv, "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert list(tmp_path.iterdir()) == [], "wrote files before failing"


def test_python_m_entry_points_route_through_the_same_parser():
    for module in ("finetune.train_builtin", "finetune.thought_channel"):
        run = subprocess.run(
            [sys.executable, "-m", module, "--max-steps", "0"], capture_output=True, text=True
        )
        assert run.returncode == 2 and "`max_steps` must be" in run.stderr, run.stderr


def test_a_recipe_module_missing_from_the_install_is_a_clear_error(monkeypatch, capsys):
    recipe = finetune_cli.Recipe("finetune.no_such_recipe", "a recipe this install lacks")
    monkeypatch.setitem(finetune_cli.RECIPES, "mas", recipe)
    assert main(["finetune", "mas", "--help"]) == 2
    err = capsys.readouterr().err
    assert "`latentworks finetune mas` needs the module finetune.no_such_recipe" in err
    assert "choose one of: builtin" in err


def test_a_missing_dependency_of_a_recipe_names_an_install_line(tmp_path, monkeypatch, capsys):
    """Only the recipe's own module missing is "not in this install"; a missing import inside it is not."""
    (tmp_path / "recipe_needing_dep.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(finetune_cli.RECIPES, "mas", finetune_cli.Recipe("recipe_needing_dep", "needs a dep"))
    assert main(["finetune", "mas"]) == 2
    err = capsys.readouterr().err
    assert "`no_such_dependency_xyz` is not installed. Install it: pip install" in err
