"""One APScheduler job per target × probe. The scheduler owns each run's timeout; probes honour cancel."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.executors.base import BaseExecutor
from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from netprobe.errors import SetupError
from netprobe.logs import FIELDS_ATTR, log_event
from netprobe.probes import REGISTRY, ProbeContext, ProbeSettings, ProbeTarget
from netprobe.probes.results import ProbeResult
from netprobe.times import utc_now

log = logging.getLogger("netprobe.scheduler")

# Slack past a round's own bound before the scheduler cancels it (resolution, loop lateness).
TIMEOUT_SLACK = 2.0

ResultHandler = Callable[[ProbeTarget, ProbeResult], None]


def spread_offset(job_id: str, every: float) -> float:
    """Stable offset in [0, every) so first runs of many jobs spread across the interval."""
    h = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big")
    return (h / 2**64) * every


class _LoopScheduler(AsyncIOScheduler):  # type: ignore[misc]
    """AsyncIOScheduler whose own timer runs the due jobs in place. Its stock timer calls `wakeup`,
    which is thread-safe: a self-pipe write, its read and one more loop iteration before every run,
    a wake-up the agent pays for each run (see bench/README.md, agent_footprint)."""

    def _start_timer(self, wait_seconds: float | None) -> None:
        self._stop_timer()
        if wait_seconds is not None:
            self._timeout = self._eventloop.call_later(wait_seconds, self._due)

    def _due(self) -> None:
        self._timeout = None
        self._start_timer(self._process_jobs())


class _RoundExecutor(BaseExecutor):  # type: ignore[misc]
    """Runs a job's coroutine as its own task. APScheduler's asyncio executor wraps it in a coroutine
    that builds events for every run (nothing here listens to them) and checks misfires (off here)."""

    def _do_submit_job(self, job: Job, run_times: list[datetime]) -> None:
        task = self._scheduler._eventloop.create_task(job.func(*job.args, **job.kwargs))
        task.add_done_callback(lambda _: self._run_job_success(job.id, ()))


class ProbeScheduler:
    """Adds, replaces and drains probe jobs; every finished round goes to `on_result`."""

    def __init__(self, ctx: ProbeContext, on_result: ResultHandler) -> None:
        self._ctx = ctx
        self._on_result = on_result
        self._sched = _LoopScheduler(timezone=UTC, executors={"default": _RoundExecutor()}, job_defaults={
            "max_instances": 1,       # a slow probe skips its next run instead of piling up
            "coalesce": True,
            "misfire_grace_time": None,
        })
        self._inflight: set[asyncio.Task[None]] = set()
        self.skipped = 0
        self.cancelled = 0   # rounds the last drain cancelled
        self._draining = False
        self._sched.add_listener(self._on_missed, mask=EVENT_JOB_MAX_INSTANCES)

    def start(self) -> None:
        self._sched.start()

    def set_jobs(self, jobs: list[tuple[ProbeTarget, str, ProbeSettings]]) -> None:
        """Replace the whole job set (start-up and SIGHUP reload)."""
        wanted = {f"{t.id}:{probe}" for t, probe, _ in jobs}
        for job in self._sched.get_jobs():
            if job.id not in wanted:
                job.remove()
        now = datetime.now(UTC)
        for target, probe, settings in jobs:
            job_id = f"{target.id}:{probe}"
            first = now + timedelta(seconds=spread_offset(job_id, settings.every))
            self._sched.add_job(self._run, IntervalTrigger(seconds=settings.every, start_date=first),
                                args=(target, probe, settings), id=job_id, name=job_id,
                                replace_existing=True, next_run_time=first)

    async def run_once(self, target: ProbeTarget, probe: str, settings: ProbeSettings) -> ProbeResult:
        """One round under the scheduler's timeout; a run that overstays becomes an error result."""
        spec = REGISTRY[probe]
        started = utc_now()
        try:
            async with asyncio.timeout(settings.round_seconds() + TIMEOUT_SLACK) as bound:
                return await spec.round(target, settings, self._ctx)
        except SetupError as exc:  # e.g. an IPv6 target on a host without IPv6: that target's data
            return ProbeResult(probe=probe, host=target.host, started_at=started, status="error",
                               error_kind="setup", error=str(exc))
        except TimeoutError:
            if not bound.expired():  # the probe's own TimeoutError escaped: a bug, not an overrun
                raise
            return ProbeResult(probe=probe, host=target.host, started_at=started, status="error",
                               error_kind="timeout",
                               error=f"round exceeded {settings.round_seconds() + TIMEOUT_SLACK:g}s")

    async def _run(self, target: ProbeTarget, probe: str, settings: ProbeSettings) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            result = await self.run_once(target, probe, settings)
        except asyncio.CancelledError:
            if self._draining:  # cancelled by drain(): expected, not a job failure to log
                return
            raise
        except Exception:  # a bug in a probe must not stop the others
            log.exception("probe crashed", extra={FIELDS_ATTR: {"target": target.id, "probe": probe}})
            return
        finally:
            self._inflight.discard(task)
        self._on_result(target, result)

    def _on_missed(self, event: object) -> None:
        self.skipped += 1
        job_id = getattr(event, "job_id", "?")
        log_event(log, "warning", "previous round still running; skipped", job=job_id)

    async def close(self, timeout: float) -> None:
        """drain() as a service stops (netprobe.lifecycle); the count it returns stays in `cancelled`."""
        self.cancelled = await self.drain(timeout)

    async def drain(self, grace: float) -> int:
        """Stop scheduling; wait up to `grace` s for running rounds, then cancel them. Returns cancelled.

        The scheduler is paused, not shut down, while rounds finish: APScheduler's asyncio executor
        cancels every running job on shutdown, which would throw away rounds that could complete."""
        if self._sched.running:
            self._sched.pause()
        self._draining = True
        pending = set(self._inflight)
        still: set[asyncio.Task[None]] = set()
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=1.0)
        if self._sched.running:
            self._sched.shutdown(wait=False)
            await asyncio.sleep(0)  # APScheduler applies the shutdown on the next loop iteration
        return len(still)
