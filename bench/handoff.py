"""Hand-off table: does the latent channel carry the information only the upstream agents hold?

Rows, in order (each: accuracy, Wilson 95% CI, bytes handed to the final agent, s/item):
no_info (final agent alone: the floor), oracle (one agent reading every share and the question: the
ceiling), text_mas (holders decode a note), latent_kv (kv edges: holder prompt + thought KV),
latent_kv_random, latent_only (latent edges: thought KV only), latent_only_random (same-norm random
thought inputs), latent_only_other (each item reads another item's thoughts), latent_only_const (every
item reads the batch-mean thoughts); then latent_only against k = 1, 2, 4, 8, 16 thoughts.

Run: python bench/handoff.py --model builtin:arith-mini-v6 --level relay --limit 100 --json out.json
     python bench/handoff.py --model smollm2-135m-instruct --data bench/data/handoff_alt.jsonl
"""

from __future__ import annotations

import argparse
import json

from eval import tasks_handoff as th
from eval.tasks_handoff_rows import K_SWEEP, ROWS, Row, run_row


def markdown(rows: list[Row], title: str) -> str:
    head = "| row | accuracy | 95% CI | bytes handed on / item | s/item |\n|---|---:|---:|---:|---:|"
    return f"**{title}**\n\n" + head + "\n" + "\n".join("| " + " | ".join(r.cells()) + " |" for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="builtin:arith-mini")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data", help="hand-off JSONL file in the schema (eval/tasks_handoff.py)")
    src.add_argument("--level", default="relay", choices=(*th.LEVELS, "mixed"))
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--latent-steps", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated subset of the rows")
    p.add_argument("--k-sweep", default=",".join(map(str, K_SWEEP)), help="'' to skip the sweep")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write {row: {correct, n, ...}} here")
    a = p.parse_args(argv)
    rows_wanted = [r for r in a.rows.split(",") if r]
    bad = [r for r in rows_wanted if r not in ROWS]
    if bad:
        p.error(f"unknown rows {bad}; choose from {list(ROWS)}")
    if a.limit < 2:
        p.error("--limit must be >= 2 (the `other` control gives each item another item's thoughts)")
    items = th.read_items(a.data) if a.data else th.make_items(a.level, a.limit, "test", a.seed)
    items = items[: a.limit]
    import torch

    from latent import load_model

    torch.set_num_threads(a.threads)
    model = load_model(a.model)
    rows = []
    for name in rows_wanted:
        rows.append(run_row(model, items, name, a.latent_steps, a.max_new_tokens, a.batch_size))
        print(" | ".join(rows[-1].cells()), flush=True)
    sweep = []
    for k in [int(x) for x in a.k_sweep.split(",") if x]:
        r = run_row(model, items, "latent_only", k, a.max_new_tokens, a.batch_size)
        r.name = f"latent_only k={k}"
        sweep.append(r)
        print(" | ".join(r.cells()), flush=True)
    where = a.data or f"level {a.level}, test split, seed {a.seed}"
    print()
    print(markdown(rows, f"{a.model}, {where}, {len(items)} items, k={a.latent_steps}"))
    if sweep:
        print()
        print(markdown(sweep, "latent_only against the number of thoughts"))
    if a.json:
        out = {
            r.name: {"correct": r.correct, "n": r.n, "bytes_in": r.bytes_in, "s_per_item": r.s_per_item}
            for r in rows + sweep
        }
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
