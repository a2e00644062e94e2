"""Hand-off table: does the latent channel carry the information only the upstream agents hold?

Rows, in order (each: accuracy, Wilson 95% CI, bytes handed to the final agent, s/item):
no_info (final agent alone: the floor), oracle (one agent reading every share and the question: the
ceiling), text_mas (holders decode a note), latent_kv (kv edges: holder prompt + thought KV),
latent_kv_random, latent_only (latent edges: thought KV only), latent_only_random (same-norm random
thought inputs), latent_only_other (each item reads another item's thoughts), latent_only_const (every
item reads the batch-mean thoughts); then latent_only against k = 1, 2, 4, 8, 16 thoughts.
Across two models (`--sender S --bridge B`): the holders run S, the answerer `--model`, latent edges read
through bridge B; the kv rows are left out (caches never cross models) and the bytes of a latent row are
the thought floats handed across.

Run: python bench/studies/handoff.py --model builtin:arith-mini-v6 --level relay --limit 100 --json out.json
     python bench/studies/handoff.py --model smollm2-135m-instruct --data bench/data/handoff_alt.jsonl
     python bench/studies/handoff.py --model qwen2.5-coder-0.5b-instruct --sender qwen2.5-coder-1.5b-instruct \
         --bridge qwen2.5-coder-1.5b-instruct-handoff-to-qwen2.5-coder-0.5b-instruct-bridge --level relay
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from functools import partial

from eval.tasks import handoff as th
from eval.tasks.handoff_rows import K_SWEEP, MAX_NEW_TOKENS, PAIR_ROWS, ROWS, Pair, Row, run_row
from latent.args import UsageError, add_config_arguments, config_from_args, run_script


def markdown(rows: list[Row], title: str) -> str:
    head = "| row | accuracy | 95% CI | bytes handed on / item | s/item |\n|---|---:|---:|---:|---:|"
    return f"**{title}**\n\n" + head + "\n" + "\n".join("| " + " | ".join(r.cells()) + " |" for r in rows)


@dataclass
class HandoffBench:
    """Flags of the hand-off table."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "load_model name or path"})
    sender: str | None = field(
        default=None,
        metadata={"help": "the holders' model, for a hand-off across two models (with --bridge)"},
    )
    bridge: str | None = field(
        default=None, metadata={"help": "name or path of the bridge from --sender to --model"}
    )
    data: str | None = field(
        default=None, metadata={"help": "hand-off JSONL file in the schema (eval/tasks/handoff.py)"}
    )
    level: str | None = field(
        default=None,
        metadata={
            "help": "generated items of this level instead of --data (default: relay)",
            "choices": (*th.LEVELS, "mixed"),
        },
    )
    limit: int = field(default=100, metadata={"help": "items"})
    seed: int = field(default=0, metadata={"help": "seed of the generated items"})
    latent_steps: int = field(default=4, metadata={"help": "thoughts per holder in the rows"})
    max_new_tokens: int = field(default=MAX_NEW_TOKENS, metadata={"help": "decode budget of the final agent"})
    batch_size: int = field(default=16, metadata={"help": "items per batch"})
    rows: str = field(default=",".join(ROWS), metadata={"help": "comma-separated subset of the rows"})
    k_sweep: str = field(
        default=",".join(map(str, K_SWEEP)),
        metadata={"help": "thought counts of the latent_only sweep; '' skips it"},
    )
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    json: str | None = field(default=None, metadata={"help": "write {row: {correct, n, ...}} here"})

    def __post_init__(self) -> None:
        if self.data and self.level:
            raise UsageError("--data and --level exclude each other. Give one")
        if not self.data and not self.level:
            self.level = "relay"
        if bool(self.sender) != bool(self.bridge):
            raise UsageError("--sender and --bridge go together (a hand-off across two models). Give both")
        if self.sender and self.rows == ",".join(ROWS):
            self.rows = ",".join(PAIR_ROWS)
        allowed = PAIR_ROWS if self.sender else tuple(ROWS)
        bad = [r for r in self.rows.split(",") if r and r not in allowed]
        if bad:
            raise UsageError(f"unknown rows {bad}; choose from {list(allowed)}")
        if self.limit < 2:
            raise UsageError(
                "--limit must be >= 2 (the `other` control gives each item another item's thoughts)"
            )


def run(args: argparse.Namespace) -> int:
    a = config_from_args(HandoffBench, args)
    rows_wanted = [r for r in a.rows.split(",") if r]
    items = th.read_items(a.data) if a.data else th.make_items(a.level, a.limit, "test", a.seed)
    items = items[: a.limit]
    import torch

    from latent import load_model

    torch.set_num_threads(a.threads)
    model = load_model(a.model)
    pair = None
    if a.sender:
        from latent.bridge import Bridge

        pair = Pair(load_model(a.sender), Bridge.from_pretrained(a.bridge, model.device))
    rows = []
    for name in rows_wanted:
        rows.append(run_row(model, items, name, a.latent_steps, a.max_new_tokens, a.batch_size, pair))
        print(" | ".join(rows[-1].cells()), flush=True)
    sweep = []
    for k in [int(x) for x in a.k_sweep.split(",") if x]:
        r = run_row(model, items, "latent_only", k, a.max_new_tokens, a.batch_size, pair)
        r.name = f"latent_only k={k}"
        sweep.append(r)
        print(" | ".join(r.cells()), flush=True)
    where = a.data or f"level {a.level}, test split, seed {a.seed}"
    print()
    who = f"{a.sender} -> {a.model} through {a.bridge}" if a.sender else a.model
    print(markdown(rows, f"{who}, {where}, {len(items)} items, k={a.latent_steps}"))
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


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/handoff.py", __doc__, partial(add_config_arguments, cls=HandoffBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
