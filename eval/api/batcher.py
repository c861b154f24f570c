"""The micro-batcher: concurrent requests share the grader's batches, each failing alone."""

from __future__ import annotations

import asyncio
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from eval.labelers import Hit, HitLabel, Labeler


@dataclass
class _Job:
    qid: str
    query: str
    hits: list[Hit]
    future: asyncio.Future


class QueueFull(Exception):
    """More pairs waiting than ``max_queued_pairs``, or more grading time queued than
    ``max_wait_s``: the client should retry after ``retry_after`` seconds (503)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MicroBatcher:
    """Gathers concurrent requests for up to ``wait_ms`` and labels them in one batched call.

    At most ``max_queued`` pairs wait or run at once, and a request that would wait more than
    ``max_wait_s`` at the measured grading rate is refused (both :class:`QueueFull`); a request
    whose caller stopped waiting (its future cancelled) is dropped before it is graded.
    """

    def __init__(
        self,
        labeler: Labeler,
        wait_ms: float = 5.0,
        max_pairs: int = 256,
        max_queued: int = 1024,
        max_wait_s: float = 30.0,
    ) -> None:
        self.labeler = labeler
        self.wait = wait_ms / 1000
        self.max_pairs = max_pairs
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.pairs_per_second: float | None = None  # measured on the batches graded so far
        self.pending = 0  # pairs queued or being labelled
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
        """One tiny labelling call, so the first client does not pay the start-up cost."""
        await self._label_many([("warm-up", "warm up", [Hit("warm-up", "warm up")])])

    def expected_wait(self, pairs: int) -> float | None:
        """Seconds until ``pairs`` more would be graded, at the measured rate (None: unknown)."""
        if not self.pairs_per_second:
            return None
        return (self.pending + pairs) / self.pairs_per_second

    async def label(self, query: str, hits: list[Hit]) -> list[HitLabel]:
        wait = self.expected_wait(len(hits))
        retry_after = max(1, math.ceil(wait or 1))
        if self.pending and self.pending + len(hits) > self.max_queued:
            raise QueueFull(
                f"{self.pending} pairs are waiting; the limit is {self.max_queued}", retry_after
            )
        if self.pending and wait is not None and wait > self.max_wait_s:
            raise QueueFull(
                f"about {wait:.0f} s of grading is queued; the limit is {self.max_wait_s:.0f} s",
                retry_after,
            )
        future = asyncio.get_running_loop().create_future()
        self.pending += len(hits)
        try:
            await self.queue.put(_Job("q", query, hits, future))
            return await future
        finally:
            self.pending -= len(hits)

    async def _next_jobs(self) -> list[_Job]:
        loop = asyncio.get_running_loop()
        jobs = [await self.queue.get()]
        pairs = len(jobs[0].hits)
        deadline = loop.time() + self.wait
        while pairs < self.max_pairs:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            try:
                job = await asyncio.wait_for(self.queue.get(), timeout)
            except TimeoutError:
                break
            jobs.append(job)
            pairs += len(job.hits)
        live = [job for job in jobs if not job.future.done()]  # callers gone: not graded
        self.dropped += len(jobs) - len(live)
        return live

    async def _run(self) -> None:
        while True:
            jobs = await self._next_jobs()
            if not jobs:
                continue
            requests = [(f"q{i}", job.query, job.hits) for i, job in enumerate(jobs)]
            try:
                started = time.perf_counter()
                results = await self._label_many(requests)
                rate = sum(len(job.hits) for job in jobs) / max(time.perf_counter() - started, 1e-6)
                # Smoothed over batches: one small or cold batch must not swing the estimate.
                previous = self.pairs_per_second
                self.pairs_per_second = rate if previous is None else 0.7 * previous + 0.3 * rate
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
