"""A ProbeScheduler's job set, read for the scheduler's tests."""

from __future__ import annotations

from netprobe.agent.scheduler import ProbeScheduler


def job_ids(sched: ProbeScheduler) -> list[str]:
    return sorted(j.id for j in sched._sched.get_jobs())
