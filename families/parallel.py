"""Run a demo's independent jobs (a function and its arguments) in worker processes of one torch thread
each, keeping the jobs' order; `workers=1` runs them in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

__all__ = ["run_jobs"]


def run_jobs(jobs: Sequence[tuple[Callable[..., Any], tuple]], workers: int) -> list[Any]:
    """`[fn(*args) for fn, args in jobs]`, spread over `workers` processes (functions must be importable)."""
    if workers < 1:
        raise ValueError(f"`workers` must be >= 1, got {workers}.")
    if workers == 1:
        return [fn(*args) for fn, args in jobs]
    with ProcessPoolExecutor(max_workers=workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = [pool.submit(fn, *args) for fn, args in jobs]
        return [f.result() for f in futures]
