"""Does a retrained hand-off model reproduce a published table? Row by row, two `handoff.py --json` files.

For each row both runs have: the published count and its Wilson 95% interval, the new count and its
interval, whether the new rate lies inside the published interval, and whether the two intervals overlap.
Both files must come from the same items (same level or --data file, same --limit and --seed): the script
checks that every shared row has the same n. Writes the table to --out as markdown when given.

Run: python bench/studies/handoff.py --model /path/to/retrained --level sum --limit 100 --json new_sum.json
     python bench/studies/handoff_compare.py --published bench/results/handoff_v8_sum.json --new new_sum.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from eval.report import wilson
from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class CompareOptions:
    """Flags of the comparison."""

    published: str = field(default="", metadata={"help": "the published table (handoff.py --json)"})
    new: str = field(default="", metadata={"help": "the retrained model's table on the same items"})
    title: str = field(default="", metadata={"help": "a line above the table"})
    out: str = field(default="", metadata={"help": "also write the markdown here ('' = print only)"})


def compare(published: dict, new: dict) -> list[dict]:
    """One record per row both tables have, in the published table's order."""
    out = []
    for row, p in published.items():
        if row not in new:
            continue
        q = new[row]
        if p["n"] != q["n"]:
            raise UsageError(f"row {row!r} has n {p['n']} and {q['n']}: run both tables on the same items")
        lo, hi = wilson(p["correct"], p["n"])
        lo2, hi2 = wilson(q["correct"], q["n"])
        rate = q["correct"] / q["n"]
        out.append(
            {
                "row": row,
                "published": (p["correct"], p["n"], lo, hi),
                "new": (q["correct"], q["n"], lo2, hi2),
                "inside": lo <= rate <= hi,
                "overlap": lo2 <= hi and lo <= hi2,
            }
        )
    return out


def markdown(records: list[dict], title: str) -> str:
    def cell(k: int, n: int, lo: float, hi: float) -> str:
        return f"{k}/{n} ({lo:.1%}-{hi:.1%})"

    lines = [f"**{title}**", ""] if title else []
    lines += [
        "| row | published | retrained | inside the published interval | intervals overlap |",
        "|---|---:|---:|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['row']} | {cell(*r['published'])} | {cell(*r['new'])} | {'yes' if r['inside'] else 'no'} | "
            f"{'yes' if r['overlap'] else 'no'} |"
        )
    inside = sum(r["inside"] for r in records)
    overlap = sum(r["overlap"] for r in records)
    lines += [
        "",
        f"{inside} of {len(records)} rows inside the published interval; {overlap} with overlapping intervals.",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    opts = config_from_args(CompareOptions, args)
    for name in ("published", "new"):
        path = getattr(opts, name)
        if not path or not Path(path).is_file():
            raise UsageError(f"--{name}: no such file {path!r}; pass a table written by handoff.py --json")
    records = compare(json.loads(Path(opts.published).read_text()), json.loads(Path(opts.new).read_text()))
    text = markdown(records, opts.title)
    print(text)
    if opts.out:
        Path(opts.out).write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/handoff_compare.py",
        __doc__,
        partial(add_config_arguments, cls=CompareOptions),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
