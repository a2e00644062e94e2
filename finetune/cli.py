"""`latentworks finetune builtin|mas`: the fine-tuning recipes behind one command.

Each recipe lives in its own module with `add_arguments(parser)` and `run(args) -> int`; a recipe's
module is imported only when it is chosen, so `latentworks finetune --help` imports no torch.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from types import ModuleType

from latent.args import UsageError, add_subcommands

__all__ = ["RECIPES", "add_arguments", "run"]


@dataclass(frozen=True)
class Recipe:
    """A recipe sub-action: the module that runs it and its one-line help."""

    module: str  # has add_arguments(parser) and run(args) -> int
    help: str


RECIPES: dict[str, Recipe] = {
    "builtin": Recipe(
        "finetune.train_builtin",
        "train a built-in model (builtin:arith-mini) from scratch: pretraining + SFT",
    ),
    "mas": Recipe(
        "finetune.thought_channel",
        "train a model's thought channel (latent hand-off between agents): a LoRA + aligner, or every "
        "weight of a built-in model; --config RECIPE.yaml reproduces a shipped model",
    ),
}


def recipe_module(name: str) -> ModuleType:
    """The module of recipe `name`; a recipe whose module this install lacks is a clear error."""
    recipe = RECIPES[name]
    try:
        return importlib.import_module(recipe.module)
    except ModuleNotFoundError as err:
        if err.name != recipe.module:
            raise  # a dependency is missing: the router names the extra that provides it
        raise UsageError(
            f"`latentworks finetune {name}` needs the module {recipe.module}, which this install does not "
            f"have. Update latentworks, or choose one of: {', '.join(n for n in RECIPES if n != name)}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe sub-actions; each one's flags are added (and its module imported) only when chosen."""
    add_subcommands(
        parser,
        "recipe",
        {
            name: (r.help, lambda p, name=name: recipe_module(name).add_arguments(p))
            for name, r in RECIPES.items()
        },
    )


def run(args: argparse.Namespace) -> int:
    """Run the chosen recipe; its exit status."""
    return int(recipe_module(args.recipe).run(args) or 0)
