"""Dynamic batching for the server: the sentences of requests that arrive together run as
one batch, and no batch runs for a request that no longer waits.

Requests wait in one bounded queue under a key (the model and search settings a batch must
share). A worker fills a batch of at most ``batch_size`` sentences of the oldest request's key
until it is full, the oldest has waited ``max_wait``, or (with ``gap``) none has arrived for
``gap`` seconds; after ``company_seconds`` of one request at a time, a request runs at once.
A request larger than a batch runs over several: newer requests go first, and it keeps up to
half of each batch. Nothing of a request that no longer waits (client gone, deadline passed)
runs; each request gets its results once all its sentences are done. Batches run in daemon
threads off the event loop (:class:`DaemonThreads`), so a stopped server is not held. A request
that would take the queue past ``queue_size`` sentences is refused at once
(:class:`RequestError` 503). Cost: memory grows with ``queue_size``, not with traffic
(docs/export-serving.md, "Serving over HTTP without TensorFlow: ``keras-nmt serve``").
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import dataclasses
import itertools
import math
import threading
from typing import Callable, Hashable, Sequence

from keras_nmt.core.errors import RequestError


class DaemonThreads:
    """Runs functions in daemon threads, and knows whether any still runs.

    Unlike an executor's threads, one still running when the server has stopped is not
    waited for. A process must not finalize its interpreter under one that is inside
    onnxruntime, though (the thread's forcible exit unwinds through C++ frames and aborts
    the process): :meth:`running` tells the command to end it at once instead."""

    def __init__(self, name: str):
        self.name = name
        # Called first in each new thread (the server lowers its priority there).
        self.starting: Callable[[], object] | None = None
        # Functions not yet returned. Not the threads alive: one that has returned and
        # only hands its result over may outlive the loop's shutdown by a moment, and
        # counting it would end the process early for nothing.
        self._inside = 0
        self._lock = threading.Lock()

    def run(self, function: Callable, *args) -> asyncio.Future:
        """``function(*args)`` in a new daemon thread: a future of the running loop that
        gets its result or exception."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result, error) -> None:
            if future.done():  # cancelled: nobody waits for it any more
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        def run() -> None:
            try:
                if self.starting is not None:
                    self.starting()
                result, error = function(*args), None
            except BaseException as caught:  # noqa: BLE001 (handed to the waiting coroutine)
                result, error = None, caught
            finally:
                with self._lock:
                    self._inside -= 1
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(settle, result, error)

        thread = threading.Thread(target=run, name=self.name, daemon=True)
        with self._lock:
            self._inside += 1
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self._inside -= 1
            raise
        return future

    def running(self) -> bool:
        """Whether a function still runs in one of the threads."""
        with self._lock:
            return self._inside > 0


@dataclasses.dataclass(eq=False)
class _Job:
    key: Hashable
    items: Sequence
    arrived: float
    future: asyncio.Future
    results: list
    # ends[i]: the sentences of items[:i + 1] (an item weighs the sentences it stands for)
    ends: list[int]
    taken: int = 0  # items given to a batch (forming or running)
    started: int = 0  # items given to a batch that ran or runs
    finished: int = 0  # items whose results are in

    @property
    def waits(self) -> bool:
        return not self.future.done()

    def weight(self, start: int, stop: int) -> int:
        """The sentences of ``items[start:stop]``."""
        return (self.ends[stop - 1] if stop else 0) - (self.ends[start - 1] if start else 0)

    def fitting(self, room: int) -> int:
        """How far from ``taken`` the items within ``room`` sentences reach (at least one
        item when ``room`` is positive: an item heavier than a batch runs alone)."""
        base = self.ends[self.taken - 1] if self.taken else 0
        stop = bisect.bisect_right(self.ends, base + room, self.taken)
        return max(stop, self.taken + 1) if room > 0 else self.taken


class Batch(list):
    """A batch's items, as ``run`` gets them; :meth:`alive` says which still have a
    request waiting, so that a run of several passes can skip the rest of the others."""

    def __init__(self, items, owners: Sequence[_Job]):
        super().__init__(items)
        self._owners = owners

    def alive(self) -> list[bool]:
        return [job.waits for job in self._owners]


@dataclasses.dataclass
class BatchStats:
    """Counters for ``GET /stats`` (and the tests that check batching happens)."""

    requests: int = 0  # accepted
    rejected: int = 0  # refused with 503: queue full or shutting down
    batches: int = 0
    sentences: int = 0  # in batches run (an item weighs the sentences it stands for)
    largest_batch: int = 0
    waiting: int = 0  # sentences queued now, not yet in a running batch
    dropped: int = 0  # sentences never run: their request stopped waiting first


class Batcher:
    """``await submit(key, items, weights)`` -> ``run(key, batch)``'s results for those
    items, computed in batches of at most ``batch_size`` sentences with other requests of
    the same key (:class:`Batch`); ``weights``: the sentences each item stands for (1 each
    by default), which the queue bound counts too."""

    def __init__(self, run: Callable[[Hashable, list], list], batch_size: int,
                 max_wait: float, queue_size: int, threads: int = 1, gap: float = 0.0,
                 company_seconds: float = 1.0):
        if (batch_size < 1 or queue_size < 1 or threads < 1 or max_wait < 0 or gap < 0
                or company_seconds < 0):
            raise ValueError("batch_size, queue_size and threads must be >= 1, max_wait, "
                             "gap and company_seconds >= 0")
        self._run = run
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.gap = gap  # 0: a batch waits for max_wait whether requests come or not
        self.company_seconds = company_seconds
        self._held = 0  # requests submitted and not yet answered, failed or cancelled
        self._company_at = -math.inf  # when two requests or more were last held at once
        self.queue_size = queue_size
        self.threads = threads
        self.stats = BatchStats()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._arrived: asyncio.Event | None = None
        self._workers: list[asyncio.Task] = []
        self._running = 0  # batches running now
        self.threads_of_batches = DaemonThreads("batch")
        self._hurry = False  # shutting down: run what is queued without waiting for more
        self._closed = False

    def start(self) -> None:
        """Start the workers (in the running event loop)."""
        self._arrived = asyncio.Event()
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.threads)]

    async def submit(self, key: Hashable, items: Sequence,
                     weights: Sequence[int] | None = None) -> list:
        """The results of ``items``, in order. Cancelling the caller (a client gone, a
        deadline passed) drops whatever of them has not run yet."""
        if self._closed or self._hurry:
            self.stats.rejected += 1
            raise RequestError(503, "the server is shutting down")
        ends = list(itertools.accumulate(weights if weights is not None else [1] * len(items)))
        sentences = ends[-1] if ends else 0
        if self.stats.waiting + sentences > self.queue_size:
            self.stats.rejected += 1
            raise RequestError(503, f"the server is busy ({self.stats.waiting} sentences "
                                    f"queued, at most {self.queue_size}): try again later")
        if not items:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(key, items, loop.time(), loop.create_future(), [None] * len(items), ends)
        job.future.add_done_callback(lambda _: self._forget(job))
        self._held += 1
        if self._held > 1:
            self._company_at = job.arrived
        self._jobs.append(job)
        self.stats.requests += 1
        self.stats.waiting += sentences
        self._arrived.set()
        try:
            return await job.future
        finally:
            if not job.future.done():  # the caller was cancelled: drop what is left
                job.future.cancel()

    def _forget(self, job: _Job) -> None:
        """A job is answered, failed or cancelled: its sentences not yet running leave
        the queue at once."""
        self._held -= 1
        left = job.weight(job.started, len(job.items))
        self.stats.waiting -= left
        if job.future.cancelled():
            self.stats.dropped += left

    def hurry(self) -> None:
        """Refuse new requests and run the queued ones without waiting for more."""
        self._hurry = True
        if self._arrived is not None:
            self._arrived.set()

    async def close(self, timeout: float | None = None) -> None:
        """Run the queued requests for at most ``timeout`` seconds (None: all of them),
        then answer those still waiting 503 and stop the workers; a batch still running
        then is left to its daemon thread."""
        self.hurry()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        while (self._running or any(job.waits for job in self._jobs)) and self._workers:
            if deadline is not None and loop.time() >= deadline:
                break
            await asyncio.sleep(0.01)
        self._closed = True
        for job in self._jobs:
            if job.waits:
                job.future.set_exception(RequestError(503, "the server is shutting down"))
        self._jobs.clear()
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def _oldest(self) -> _Job | None:
        """The oldest job still waiting with sentences not yet given to a batch; jobs
        before it that are done or fully given leave the queue."""
        while self._jobs:
            job = self._jobs[0]
            if job.waits and job.taken < len(job.items):
                return job
            self._jobs.popleft()
        return None

    def _fill(self, key: Hashable, pieces: list, size: int) -> int:
        """Add to ``pieces`` (job, start, stop) the waiting items of ``key`` that fit,
        requests that have not run yet first, each in arrival order, with up to half the
        batch kept for the rest of requests already under way; the new size, in sentences
        (beyond ``batch_size`` only for one item heavier than a batch, alone)."""
        fresh = [job for job in self._jobs if job.key == key and job.waits and job.taken == 0]
        going = [job for job in self._jobs if job.key == key and job.waits
                 and 0 < job.taken < len(job.items)]
        kept = min(sum(job.weight(job.taken, len(job.items)) for job in going),
                   self.batch_size // 2)
        for jobs, limit in ((fresh, self.batch_size - kept), (going, self.batch_size)):
            for job in jobs:
                if size >= limit:
                    break
                stop = job.fitting(limit - size)
                if size and job.weight(job.taken, stop) > limit - size:
                    break  # a heavy item waits for a batch of its own
                pieces.append((job, job.taken, stop))
                size += job.weight(job.taken, stop)
                job.taken = stop
        return size

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            first = self._oldest()
            if first is None:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            pieces: list = []
            size = 0
            deadline = first.arrived + self.max_wait
            while True:
                size = self._fill(first.key, pieces, size)
                remaining = deadline - loop.time()
                if size >= self.batch_size or self._hurry or remaining <= 0:
                    break
                if self.gap and loop.time() - self._company_at > self.company_seconds:
                    break  # one request at a time lately: no company to wait for
                self._arrived.clear()
                wait = min(remaining, self.gap) if self.gap else remaining
                try:
                    await asyncio.wait_for(self._arrived.wait(), wait)
                except TimeoutError:
                    if wait < remaining:  # arrivals have stopped: run what came
                        break
            pieces = [piece for piece in pieces if piece[0].waits]
            if not pieces:
                continue
            weight = 0
            for job, start, stop in pieces:
                job.started += stop - start
                weight += job.weight(start, stop)
            self.stats.waiting -= weight
            items = Batch([item for job, start, stop in pieces for item in job.items[start:stop]],
                          [job for job, start, stop in pieces for _ in range(start, stop)])
            self.stats.batches += 1
            self.stats.sentences += weight
            self.stats.largest_batch = max(self.stats.largest_batch, weight)
            self._running += 1
            try:
                results = await self.threads_of_batches.run(self._run, first.key, items)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 (each waiting request gets it)
                for job, _, _ in pieces:
                    if job.waits:
                        job.future.set_exception(error)
                continue
            finally:
                self._running -= 1
            at = 0
            for job, start, stop in pieces:
                if job.waits:
                    job.results[start:stop] = results[at : at + stop - start]
                    job.finished += stop - start
                    if job.finished == len(job.items):
                        job.future.set_result(job.results)
                at += stop - start
