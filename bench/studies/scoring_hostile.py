"""Time and memory of `score()` on hostile outputs, in the main thread and in a worker thread.

Run: `PYTHONPATH=. nice python bench/studies/scoring_hostile.py`. Prints one row per output (seconds in each thread),
then the slowest call and the process's peak RSS. `eval.scoring.symbolic` starts its helper first (a
one-time cost, printed separately).
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass, field
from functools import partial

from bench.studies.hostile_corpus import corpus  # run from the project root with PYTHONPATH=.
from eval.scoring import score
from eval.scoring.symbolic import symbolic_equal
from latent.args import add_config_arguments, config_from_args, run_script


def peak_rss_mib() -> float:
    """This process's own peak resident memory (VmHWM), in MiB.

    Not `getrusage().ru_maxrss`: Linux keeps that across execve, so a process started from a big
    parent (a pytest run with models loaded) would report the parent's peak as its own.
    """
    with open("/proc/self/status") as f:
        line = next(ln for ln in f if ln.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _timed(item, text, timeout) -> tuple[float, object]:
    start = time.perf_counter()
    s = score(item, text, sandbox_timeout=timeout)
    return time.perf_counter() - start, s


def _in_thread(item, text, timeout) -> tuple[float, object]:
    out = []
    t = threading.Thread(target=lambda: out.append(_timed(item, text, timeout)))
    t.start()
    t.join()
    return out[0]


@dataclass
class HostileBench:
    """Flags of the hostile-output timing."""

    sandbox_timeout: float = field(default=1.0, metadata={"help": "the candidate's own time, seconds"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(HostileBench, ns)
    start = time.perf_counter()
    symbolic_equal("1", "1")
    print(f"symbolic helper start (once): {time.perf_counter() - start:.2f} s")
    rows = corpus()
    base = peak_rss_mib()
    print("| output | kind | main thread s | worker thread s | correct |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name, item, text in rows:
        t_main, s1 = _timed(item, text, args.sandbox_timeout)
        t_thr, s2 = _in_thread(item, text, args.sandbox_timeout)
        worst = max(worst, t_main, t_thr)
        print(f"| {name} | {item.kind} | {t_main:.3f} | {t_thr:.3f} | {s1.correct}/{s2.correct} |")
    peak = peak_rss_mib()
    print(
        f"\n{len(rows)} outputs; slowest call {worst:.2f} s; peak RSS {peak:.0f} MiB (after imports {base:.0f} MiB)"
    )

    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/scoring_hostile.py",
        __doc__,
        partial(add_config_arguments, cls=HostileBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
