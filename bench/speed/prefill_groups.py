"""One agent's prompt read + latent steps with and without length-grouped prefill (`LatentModel.group_pads`).

    python bench/speed/prefill_groups.py --model smollm2-135m-instruct --batch 16 --repeats 4

A left-padded batch spends compute on its pads; on a CPU reading rows of similar length together (each
group padded only to its own longest row) skips most of it. Both settings run interleaved in one
process on the same rg:gsm_symbolic planner prompts; thoughts of the two are compared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402


@dataclass
class PrefillGroupsBench:
    """Flags of the grouped-prefill timing."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    batch: int = field(default=16, metadata={"help": "planner prompts in the batch"})
    steps: int = field(default=8, metadata={"help": "latent steps after the prompt read"})
    repeats: int = field(default=4, metadata={"help": "interleaved timings per setting"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(PrefillGroupsBench, ns)
    import torch

    torch.set_num_threads(args.threads)
    from agents.prompts import PromptSet
    from eval.tasks import load_task
    from latent import load_model
    from latent.memory import WorkingMemory

    m = load_model(args.model, dtype=torch.float32)
    prompts = PromptSet.load("default")
    items = load_task("rg:gsm_symbolic", limit=args.batch).items
    enc = m.encode([prompts.messages("planner", it.question) for it in items])

    def run(grouped: bool):
        m.group_pads = grouped
        mem = WorkingMemory(m)
        st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        _, lid = mem.write_latent("planner", st, args.steps, [pid], owned=True)
        return mem.segments[lid].embeds

    run(True), run(False)
    t_on, t_off = [], []
    for r in range(args.repeats):
        for grouped in (True, False) if r % 2 == 0 else (False, True):
            t0 = time.perf_counter()
            th = run(grouped)
            (t_on if grouped else t_off).append(time.perf_counter() - t0)
            if grouped:
                th_on = th
            else:
                th_off = th
    m.group_pads = True
    ratios = [b / a for a, b in zip(t_on, t_off)]
    diff = float(((th_on - th_off).norm(dim=-1) / th_off.norm(dim=-1)).max())
    real = int(enc["attention_mask"].sum())
    print(
        f"{args.model}, batch {args.batch} ({real} real of {enc['input_ids'].numel()} padded tokens), "
        f"{args.steps} latent steps, {args.threads} thread(s)"
    )
    print(
        f"grouped {statistics.median(t_on):.3f} s, one call {statistics.median(t_off):.3f} s, "
        f"one call / grouped median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}), "
        f"thought max rel diff {diff:.1e}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/prefill_groups.py",
        __doc__,
        partial(add_config_arguments, cls=PrefillGroupsBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
