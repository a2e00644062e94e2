"""Gathers concurrent requests into batched runs: the oldest waiting request waits at most `wait_s` for
others with the same key to join, then up to `max_batch` of them run together in one worker thread
(one batch at a time: the model is shared and the CPU/GPU is the bottleneck). Waiting requests are
capped at `max_queue`; a request whose client has gone is taken out of the queue, freeing its place.
A batch that fails is run again one request at a time, so one bad request fails alone."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["Batcher", "QueueFull", "Ticket"]


class QueueFull(Exception):
    """Too many requests are waiting; the client should retry after `retry_after` seconds."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(f"{waiting} requests are already waiting")
        self.waiting = waiting
        self.retry_after = retry_after


@dataclass(eq=False)
class Ticket:
    """One request's place in the queue; `future` resolves to its result (or the batch's error)."""

    key: Hashable
    item: Any
    future: asyncio.Future
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class BatchStats:
    """What `/health` reports: how many batches ran and how large they were."""

    batches: int = 0
    requests: int = 0
    largest_batch: int = 0
    last_batch_s: float = 0.0
    failed_batches: int = 0


class Batcher:
    """`submit` a request, await its ticket's future; `run` (a task started with the app) does the rest.

    `run_batch(key, items) -> results` is called in a worker thread with every gathered item of one key,
    and must return one result per item, in order.
    """

    def __init__(
        self,
        run_batch: Callable[[Hashable, list[Any]], list[Any]],
        *,
        max_batch: int,
        wait_s: float,
        max_queue: int,
    ) -> None:
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.max_queue = max_queue
        self.stats = BatchStats()
        self._waiting: list[Ticket] = []
        self._wake: asyncio.Event | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-batch")

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, key: Hashable, item: Any) -> Ticket:
        """Queue one request; raises `QueueFull` (with a Retry-After estimate) when the queue is full."""
        if len(self._waiting) >= self.max_queue:
            raise QueueFull(len(self._waiting), self.retry_after())
        ticket = Ticket(key, item, asyncio.get_running_loop().create_future())
        self._waiting.append(ticket)
        self._signal()
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """The client has gone: drop its request if it has not started (its place frees at once)."""
        if ticket in self._waiting:
            self._waiting.remove(ticket)
            logger.debug("a waiting request was cancelled by its client")
        if not ticket.future.done():
            ticket.future.cancel()

    def retry_after(self) -> int:
        """Seconds until the queue has likely drained by one batch's worth (at least 1)."""
        batches_ahead = math.ceil(max(len(self._waiting), 1) / self.max_batch)
        return max(1, math.ceil(self.stats.last_batch_s * batches_ahead))

    async def run(self) -> None:
        """Forever: take the next batch, run it in the worker thread, hand each request its result."""
        self._wake = asyncio.Event()
        while True:
            batch = await self._next_batch()
            try:
                await self._run(batch)
            except Exception:  # one request breaks the batch: run each alone, so only it fails
                logger.exception("a batch of %d failed; running its requests one by one", len(batch))
                self.stats.failed_batches += 1
                for t in batch:
                    try:
                        await self._run([t])
                    except Exception as err:
                        if not t.future.done():
                            t.future.set_exception(err)

    async def _run(self, batch: list[Ticket]) -> None:
        live = [t for t in batch if not t.future.done()]  # clients that left during a retry drop out
        if not live:
            return
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        results = await loop.run_in_executor(
            self._executor, self.run_batch, live[0].key, [t.item for t in live]
        )
        if len(results) != len(live):
            raise RuntimeError(f"a batch of {len(live)} returned {len(results)} results")
        self._record(len(live), time.perf_counter() - t0)
        for t, result in zip(live, results):
            if not t.future.done():  # a client that left mid-batch has cancelled its future
                t.future.set_result(result)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _record(self, size: int, seconds: float) -> None:
        s = self.stats
        s.batches += 1
        s.requests += size
        s.largest_batch = max(s.largest_batch, size)
        s.last_batch_s = seconds

    def _signal(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _next_batch(self) -> list[Ticket]:
        """The oldest request's key; waits until `max_batch` of that key wait or its window has passed."""
        while True:
            self._waiting = [t for t in self._waiting if not t.future.done()]
            if not self._waiting:
                await self._wait_for_signal(None)
                continue
            first = self._waiting[0]
            same = [t for t in self._waiting if t.key == first.key]
            left = first.arrived + self.wait_s - time.monotonic()
            if len(same) >= self.max_batch or left <= 0:
                batch = same[: self.max_batch]
                taken = set(map(id, batch))
                self._waiting = [t for t in self._waiting if id(t) not in taken]
                return batch
            await self._wait_for_signal(left)

    async def _wait_for_signal(self, timeout: float | None) -> None:
        assert self._wake is not None
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass
