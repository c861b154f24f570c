"""The micro-batcher: concurrent requests share the grader's batches, each failing alone."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from measure.labelers import Hit, HitLabel, Labeler

# The rate's half-life as a share of max_wait_s (5 s of grading for 30 s): short enough that
# the estimate follows a slower machine well within one promised wait.
RATE_HALF_LIFE_SHARE = 1 / 6
# Pairs per second assumed before anything is measured (a batcher used without warm_up): below
# what the smallest grader does on 2 CPU cores at full length (about 3.6 pairs/s), so the wait
# limit holds for the first request too.
ASSUMED_PAIRS_PER_S = 1.0
# The warm-up's timed probe: this many pairs of a document longer than any grader reads (it is
# cut at the grader's max_length), so the first rate is what the longest hits cost.
PROBE_PAIRS = 4
PROBE_TEXT = "warm up " * 1500


@dataclass
class _Job:
    qid: str
    query: str
    hits: list[Hit]
    future: asyncio.Future
    deadline: float = math.inf  # when its caller was promised an answer (the clock's time)
    counted: bool = True  # its pairs are in ``pending`` until its batch ends or it is dropped
    taken: bool = False  # taken off the queue


class GradingRate:
    """Pairs graded per second over the recent grading time: each batch's pairs and seconds
    weighted by how long ago (in grading seconds) it ran, halving every ``half_life_s``."""

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self.pairs = 0.0
        self.seconds = 0.0

    def add(self, pairs: int, seconds: float) -> None:
        decay = 0.5 ** (seconds / self.half_life_s)
        self.pairs = self.pairs * decay + pairs
        self.seconds = self.seconds * decay + seconds

    @property
    def value(self) -> float | None:
        """Pairs per second, or None before any batch has been graded."""
        return self.pairs / self.seconds if self.seconds > 0 else None


class QueueFull(Exception):
    """More pairs waiting than ``max_queued_pairs``, or more grading time queued than
    ``max_wait_s``: the client should retry after ``retry_after`` seconds (503)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MicroBatcher:
    """Gathers concurrent requests for up to ``wait_ms`` and labels them in one batched call.

    Admission (each refusal a :class:`QueueFull`): at most ``max_queued`` pairs wait or run at
    once, and a request is refused when the pairs admitted before it (queued, and the whole
    batch in progress) plus its own would take more than ``max_wait_s`` at the current rate:
    :class:`GradingRate`'s recent one, lowered to what the batch in progress shows when it runs
    longer than that rate allows. That holds for a request alone too (an empty queue promises
    nothing about a request of 100 long hits): one that alone would take longer is refused with
    the number of hits that would fit. :meth:`warm_up` measures the rate before the first client
    (a timed probe of full-length pairs); until a rate is measured, ``assumed_rate`` pairs per
    second is taken. A batch takes no more pairs than its earliest deadline leaves time for, so
    requests batched behind one do not keep it past its wait. A request whose caller stopped
    waiting (its future cancelled) is dropped before it is graded.
    """

    def __init__(
        self,
        labeler: Labeler,
        wait_ms: float = 5.0,
        max_pairs: int = 256,
        max_queued: int = 1024,
        max_wait_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        assumed_rate: float = ASSUMED_PAIRS_PER_S,
    ) -> None:
        self.labeler = labeler
        self.wait = wait_ms / 1000
        self.max_pairs = max_pairs
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.assumed_rate = assumed_rate
        self.rate = GradingRate(max_wait_s * RATE_HALF_LIFE_SHARE)
        self.in_flight: tuple[int, float] | None = None  # the batch being graded: pairs, start
        self.pending = 0  # pairs admitted and not yet graded: queued or in the batch in progress
        self.held: _Job | None = None  # taken off the queue but left for the next batch
        self.queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.batches = 0
        self.dropped = 0
        # One labelling thread for the server's life: each new thread that calls torch on a CPU
        # builds its own OpenMP team (measured: 3-7 s per call from asyncio.to_thread's pool,
        # 0.3 s from one reused thread).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="labeler")

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def _label_many(self, requests: list[tuple[str, str, list[Hit]]]) -> list[list[HitLabel]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.labeler.label_many, requests)

    async def warm_up(self) -> None:
        """One tiny labelling call, so the first client does not pay the start-up cost, then a
        timed probe (:data:`PROBE_PAIRS` pairs cut at the grader's length) that gives the rate
        the first requests are admitted at."""
        await self._label_many([("warm-up", "warm up", [Hit("warm-up", "warm up")])])
        probe = [Hit(f"warm-up-{i}", PROBE_TEXT) for i in range(PROBE_PAIRS)]
        started = self.clock()
        await self._label_many([("warm-up", "warm up", probe)])
        self.rate.add(PROBE_PAIRS, max(self.clock() - started, 1e-6))

    def current_rate(self) -> float | None:
        """Pairs per second now: the recent rate, or less when the batch in progress has run
        longer than that rate allows (None: no batch graded yet)."""
        rate = self.rate.value
        if self.in_flight is not None:
            pairs, started = self.in_flight
            elapsed = self.clock() - started
            if rate is not None and elapsed * rate > pairs:
                rate = pairs / elapsed  # this batch is running slower than the recent rate
        return rate

    def expected_wait(self, pairs: int) -> float:
        """Seconds until ``pairs`` more would be graded behind every pair admitted before them,
        at the current rate (the assumed one before any is measured)."""
        return (self.pending + pairs) / (self.current_rate() or self.assumed_rate)

    def admit(self, pairs: int) -> None:
        """Count ``pairs`` as admitted, or raise :class:`QueueFull` saying which limit they break."""
        measured = self.current_rate()
        rate = measured or self.assumed_rate
        wait = self.expected_wait(pairs)
        retry_after = max(1, math.ceil(wait))
        if self.pending and self.pending + pairs > self.max_queued:
            raise QueueFull(
                f"{self.pending} pairs are waiting; the limit is {self.max_queued}", retry_after
            )
        if pairs / rate > self.max_wait_s:  # too long even with nothing queued before it
            basis = "as measured" if measured else "assumed until a batch is graded"
            fits = math.floor(self.max_wait_s * rate)
            advice = (
                f"send at most {fits} hits per request"
                if fits
                else "not even one hit fits: raise GRADER_MAX_WAIT_S"
            )
            raise QueueFull(
                f"{pairs} hits would take about {pairs / rate:.1f} s to grade at "
                f"{rate:.3g} pairs/s ({basis}); the wait limit is {self.max_wait_s:g} s: {advice}",
                retry_after,
            )
        if wait > self.max_wait_s:
            raise QueueFull(
                f"about {wait:.0f} s of grading is queued; the limit is {self.max_wait_s:.0f} s",
                retry_after,
            )
        self.pending += pairs

    def _settle(self, job: _Job) -> None:
        """Its pairs leave ``pending`` (once): graded, failed, or dropped before grading."""
        if job.counted:
            job.counted = False
            self.pending -= len(job.hits)

    async def label(self, query: str, hits: list[Hit]) -> list[HitLabel]:
        self.admit(len(hits))
        future = asyncio.get_running_loop().create_future()
        job = _Job("q", query, hits, future, deadline=self.clock() + self.max_wait_s)
        await self.queue.put(job)
        try:
            return await job.future
        finally:
            if not job.taken:  # its caller left while it was queued: it will cost nothing
                self._settle(job)

    async def _take(self) -> _Job:
        """The job left over from the last batch, else the next one queued."""
        job, self.held = self.held, None
        job = job or await self.queue.get()
        job.taken = True
        return job

    def _fits(self, pairs: int, deadline: float) -> bool:
        """Whether a batch of ``pairs`` would be graded by ``deadline`` at the recent rate."""
        rate = self.rate.value
        return rate is None or pairs / rate <= deadline - self.clock()

    def _drop(self, job: _Job) -> None:
        """A job whose caller went away: never graded."""
        self._settle(job)
        self.dropped += 1

    async def _next_jobs(self) -> list[_Job]:
        """The next batch: jobs gathered for ``wait`` seconds, up to ``max_pairs`` pairs, and no
        more than the earliest deadline that can still be met leaves time for (the job that would
        not fit waits for the next batch, so requests batched behind one do not make it late)."""
        loop = asyncio.get_running_loop()
        jobs: list[_Job] = []
        pairs, deadline, gather_until = 0, math.inf, math.inf
        while pairs < self.max_pairs:
            try:
                timeout = None if not jobs else max(gather_until - loop.time(), 0)
                job = await asyncio.wait_for(self._take(), timeout)
            except TimeoutError:
                break
            if job.future.done():
                self._drop(job)
                continue
            pairs += len(job.hits)
            if jobs and not self._fits(pairs, deadline):
                self.held = job
                break
            jobs.append(job)
            if self._fits(pairs, job.deadline):  # a job already late constrains no one
                deadline = min(deadline, job.deadline)
            gather_until = min(gather_until, loop.time() + self.wait)
        live = [job for job in jobs if not job.future.done()]  # callers gone: not graded
        for job in jobs:
            if job.future.done():
                self._drop(job)
        return live

    async def _run(self) -> None:
        while True:
            jobs = await self._next_jobs()
            if not jobs:
                continue
            pairs = sum(len(job.hits) for job in jobs)
            self.in_flight = (pairs, self.clock())
            try:
                await self._grade(jobs, pairs)
            finally:
                self.in_flight = None
                for job in jobs:
                    self._settle(job)

    async def _grade(self, jobs: list[_Job], pairs: int) -> None:
        """Label one batch and answer its callers; the batch's rate feeds :attr:`rate`."""
        requests = [(f"q{i}", job.query, job.hits) for i, job in enumerate(jobs)]
        try:
            started = self.clock()
            results = await self._label_many(requests)
            self.rate.add(pairs, max(self.clock() - started, 1e-6))
            self.batches += 1
            for job, labels in zip(jobs, results, strict=True):
                if not job.future.done():
                    job.future.set_result(labels)
        except Exception:
            # One bad request must not fail the others batched with it: each is labelled
            # alone, and only the one that fails again gets the error.
            for job in jobs:
                if job.future.done():
                    continue
                try:
                    labels = await self._label_many([("q0", job.query, job.hits)])
                    if not job.future.done():
                        job.future.set_result(labels[0])
                except Exception as exc:  # the worker lives on
                    if not job.future.done():
                        job.future.set_exception(exc)
