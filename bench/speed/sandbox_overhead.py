"""Sandbox cost per item: milliseconds for an empty program and for scoring HumanEval canonical solutions.

Run: `nice python bench/speed/sandbox_overhead.py --items 20 --repeats 3`. Prints a table (median over repeats)
and how many `return None` stubs pass (must be 0).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from functools import partial

from eval.sandbox import run_python
from eval.scoring import score
from eval.tasks import load_task
from latent.args import add_config_arguments, config_from_args, run_script


def _ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


@dataclass
class SandboxBench:
    """Flags of the sandbox-cost table."""

    items: int = field(default=20, metadata={"help": "HumanEval items to score"})
    repeats: int = field(default=3, metadata={"help": "timings per measurement (median reported)"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(SandboxBench, ns)
    items = load_task("humaneval", limit=args.items).items
    empty = _ms(lambda: run_python("pass", timeout=10), args.repeats * 5)
    answers = [f"```python\n{it.meta['prompt']}{it.gold}```" for it in items]
    passed = [0]

    def score_all() -> None:
        passed[0] = sum(score(it, a).correct for it, a in zip(items, answers))

    per_item = _ms(score_all, args.repeats) / len(items)
    stubs = [f"```python\n{it.meta['prompt']}    return None\n```" for it in items]
    stub_passed = sum(score(it, a).correct for it, a in zip(items, stubs))
    print("| measurement | ms |")
    print("|---|---|")
    print(f"| empty program (`run_python('pass')`) | {empty:.1f} |")
    print(
        f"| HumanEval canonical solution, per item ({len(items)} items, {passed[0]} passed) | {per_item:.1f} |"
    )
    print(f"| `return None` stubs passed ({len(items)} items) | {stub_passed} |")

    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/sandbox_overhead.py", __doc__, partial(add_config_arguments, cls=SandboxBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
