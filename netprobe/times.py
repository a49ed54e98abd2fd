"""Time in one place: now in UTC, ISO 8601 as every envelope and JSON output writes it, and an agent's
time zone by name, with the rule every local-time figure shares: no zone or an unknown one is UTC, and
the reason is said."""

from __future__ import annotations

import ctypes
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone_of(name: str | None) -> tuple[ZoneInfo, str | None]:
    """The agent's zone, or UTC with the reason when it has none or an unknown one."""
    if not name:
        return ZoneInfo("UTC"), "no time zone recorded"
    try:
        return ZoneInfo(name), None
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC"), f"unknown time zone {name!r}"


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    """UTC ISO 8601 with a Z, microseconds kept."""
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


PR_SET_TIMERSLACK = 29   # <linux/prctl.h>
PR_GET_TIMERSLACK = 30
# A timer may fire this much later than asked, at most, so that the kernel wakes the process once for
# timers (and socket reads) that fall close together. What is measured is stamped by the kernel when it
# happens (sends just before sendto, replies on arrival: I/O wakes at once), so the figures do not move;
# requests leave up to the slack off their nominal spacing and a round ends up to the slack later.
SLACK_PER_INTERVAL = 0.1


def timer_slack_for(configured: float, shortest_interval: float | None) -> float:
    """The slack to use: the configured one, but at most a tenth of the shortest request interval."""
    if shortest_interval is None:
        return configured
    return min(configured, shortest_interval * SLACK_PER_INTERVAL)


def set_timer_slack(seconds: float) -> None:
    """This thread's timer slack (threads started later inherit it); 0 restores the process default.
    Linux only; elsewhere nothing changes."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "prctl"):
        libc.prctl(PR_SET_TIMERSLACK, round(seconds * 1e9), 0, 0, 0)


def timer_slack() -> float:
    """This thread's timer slack in seconds (Linux; 0.0 elsewhere)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return float(libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) / 1e9 if hasattr(libc, "prctl") else 0.0
