"""Dynamic batching for the server: requests that arrive together run as one batch.

A request's sentences wait in one bounded queue with a key (the model and the search
settings a batch must share). A worker takes the oldest request and, until its batch
holds ``batch_size`` sentences or the oldest has waited ``max_wait`` seconds, adds the
later requests of the same key; the batch then runs in a thread (onnxruntime releases
the GIL), off the event loop, and each request gets its own part of the results.
Requests of another key wait for a later batch. A request that would take the queue
past ``queue_size`` sentences is refused at once (:class:`RequestError` 503): a full
server answers, it never hangs. Memory grows with ``queue_size``, not with traffic.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
from typing import Callable, Hashable, Sequence

from keras_nmt.errors import RequestError


@dataclasses.dataclass(eq=False)
class _Job:
    key: Hashable
    items: Sequence
    arrived: float
    future: asyncio.Future


@dataclasses.dataclass
class BatchStats:
    """Counters for ``GET /stats`` (and the tests that check batching happens)."""

    requests: int = 0  # accepted
    rejected: int = 0  # refused with 503: queue full or shutting down
    batches: int = 0
    sentences: int = 0  # in batches run
    largest_batch: int = 0
    waiting: int = 0  # sentences queued now (a forming batch's included)


class Batcher:
    """``await submit(key, items)`` -> ``run(key, items)``'s results for those items,
    computed in a batch with other requests of the same key."""

    def __init__(self, run: Callable[[Hashable, list], list], batch_size: int,
                 max_wait: float, queue_size: int, threads: int = 1):
        if batch_size < 1 or queue_size < 1 or threads < 1 or max_wait < 0:
            raise ValueError("batch_size, queue_size and threads must be >= 1, max_wait >= 0")
        self._run = run
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.queue_size = queue_size
        self.threads = threads
        self.stats = BatchStats()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._arrived: asyncio.Event | None = None
        self._workers: list[asyncio.Task] = []
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._hurry = False  # shutting down: run what is queued without waiting for more
        self._closed = False

    def start(self) -> None:
        """Start the workers (in the running event loop)."""
        self._arrived = asyncio.Event()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.threads, thread_name_prefix="batch"
        )
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.threads)]

    async def submit(self, key: Hashable, items: Sequence) -> list:
        if self._closed or self._hurry:
            self.stats.rejected += 1
            raise RequestError(503, "the server is shutting down")
        if self.stats.waiting + len(items) > self.queue_size:
            self.stats.rejected += 1
            raise RequestError(503, f"the server is busy ({self.stats.waiting} sentences "
                                    f"queued, at most {self.queue_size}): try again later")
        loop = asyncio.get_running_loop()
        job = _Job(key, items, loop.time(), loop.create_future())
        self._jobs.append(job)
        self.stats.requests += 1
        self.stats.waiting += len(items)
        self._arrived.set()
        try:
            return await job.future
        finally:
            if not job.future.done():  # the client went away: drop the job if still queued
                job.future.cancel()

    def hurry(self) -> None:
        """Refuse new requests and run the queued ones without waiting for more."""
        self._hurry = True
        if self._arrived is not None:
            self._arrived.set()

    async def close(self) -> None:
        """Run every queued request, then stop the workers and their threads."""
        self.hurry()
        self._closed = True
        if self._arrived is not None:
            self._arrived.set()
        await asyncio.gather(*self._workers)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    async def _oldest(self) -> _Job | None:
        while True:
            while self._jobs:
                job = self._jobs.popleft()
                if not job.future.done():
                    return job
                self.stats.waiting -= len(job.items)  # cancelled while queued
            if self._closed:
                return None
            self._arrived.clear()
            await self._arrived.wait()

    def _gather(self, batch: list[_Job], size: int) -> int:
        """Move queued jobs of the batch's key that fit into it; the new size."""
        kept: collections.deque[_Job] = collections.deque()
        while self._jobs:
            job = self._jobs.popleft()
            if job.future.done():
                self.stats.waiting -= len(job.items)
            elif job.key == batch[0].key and size + len(job.items) <= self.batch_size:
                batch.append(job)
                size += len(job.items)
            else:
                kept.append(job)
        self._jobs = kept
        return size

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self._oldest()
            if first is None:
                return
            batch = [first]
            size = len(first.items)
            deadline = first.arrived + self.max_wait
            while True:
                size = self._gather(batch, size)
                remaining = deadline - loop.time()
                if size >= self.batch_size or self._hurry or remaining <= 0:
                    break
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), remaining)
            batch = [job for job in batch if not job.future.done()]
            self.stats.waiting -= size
            if not batch:
                continue
            items = [item for job in batch for item in job.items]
            self.stats.batches += 1
            self.stats.sentences += len(items)
            self.stats.largest_batch = max(self.stats.largest_batch, len(items))
            try:
                results = await loop.run_in_executor(self._executor, self._run, first.key, items)
            except Exception as error:  # noqa: BLE001 (each waiting request gets it)
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            start = 0
            for job in batch:
                if not job.future.done():
                    job.future.set_result(results[start : start + len(job.items)])
                start += len(job.items)
