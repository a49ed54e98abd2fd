"""The local-days rule of netprobe/report/windows.py, spelled out for the tests that check it."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from netprobe.report.windows import LocalDays


def days_start(days: LocalDays) -> datetime:
    """UTC instant of local midnight starting the first day, an hour early."""
    return datetime.combine(days.first, time(), tzinfo=days.zone).astimezone(UTC) - timedelta(hours=1)


def in_days(days: LocalDays, hour: datetime) -> bool:
    """Whether the hour starting at `hour` (UTC) falls in these days."""
    return hour < days.now and days.first <= hour.astimezone(days.zone).date() <= days.last
