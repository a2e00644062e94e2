"""`latentworks models`: the built-in checkpoints and what their cards say."""

from __future__ import annotations

import argparse

from latent.loading import BUILTIN_PREFIX, list_builtin_models


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    models = list_builtin_models()
    if args.json:
        import json

        rows = [
            {
                "name": BUILTIN_PREFIX + m.name,
                "params": m.params,
                "size_bytes": m.size_bytes,
                "heldout_accuracy": m.heldout_accuracy,
                "path": str(m.path),
            }
            for m in models
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not models:
        print("no built-in models are shipped in this install")
        return 0
    print(f"{'name':<24} {'params':>10} {'size':>9} {'held-out acc':>13}")
    for m in models:
        params = f"{m.params / 1e6:.2f}M" if m.params else "?"
        acc = f"{m.heldout_accuracy:.1%}" if m.heldout_accuracy is not None else "?"
        print(f"{BUILTIN_PREFIX + m.name:<24} {params:>10} {m.size_bytes / 2**20:>8.1f}M {acc:>13}")
    return 0
