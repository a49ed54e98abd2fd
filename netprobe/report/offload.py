"""A second process for a report's CPU-bound side work: its SLO figures (report/slo.py's SloJob) are
NumPy that holds the GIL most of the time — a second thread barely helps — so one forked worker
computes them on the other core while this process reads and merges the next agents. Only for a
fleet: a fork and a pickle would cost a small report more than they save, and only in a command's
own process (see peak.compute)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

J = TypeVar("J")
R = TypeVar("R")


def _worker_start() -> None:
    # Ctrl-C is the parent's to handle: it cancels what is queued, the worker ends its job and exits.
    # The wake-up fd is the parent loop's socket, inherited by the fork: a signal here must not ring it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)


class Offload:
    """With `enabled`, one worker forked on entering (before this process holds the report's data:
    each page the parent writes after a fork is copied) runs the jobs; else they run inline. Leaving
    cancels what has not started and lets the worker go."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Offload:
        if self.enabled:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # what is buffered would be written twice: the fork copies it and the worker flushes at exit
            sys.stdout.flush()
            sys.stderr.flush()
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                             initializer=_worker_start)
            self._pool.submit(int)          # the fork happens at the first job
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=exc[0] is None, cancel_futures=True)
            self._pool = None

    def run(self, fn: Callable[[J], R], job: J) -> Pending[R]:
        """fn(job), handed to the worker (or run here now): its result when awaited."""
        if self._pool is not None:
            return Pending(fn, job, self._pool.submit(fn, job))
        return Pending(fn, job, None)


class Pending(Generic[R]):
    """A job's result. Awaited, a job the worker has not started yet is taken back and run here: a
    command that has read everything then shares the rest with the worker instead of waiting (the
    budget, which reads little, would otherwise mostly wait) — awaited last first, so the two work
    from the queue's two ends."""

    __slots__ = ("_fn", "_future", "_job", "_value")

    def __init__(self, fn: Callable[[J], R], job: J, future: Future[R] | None) -> None:
        self._future = future
        if future is None:
            self._value = fn(job)
        else:
            self._fn, self._job = fn, job

    async def result(self) -> R:
        if self._future is None:
            return self._value
        if self._future.cancel():           # not started: the worker will not run it
            return self._fn(self._job)
        from concurrent.futures.process import BrokenProcessPool

        try:
            return await asyncio.wrap_future(self._future)
        except BrokenProcessPool:           # the worker died (killed, out of memory): done here instead
            return self._fn(self._job)
