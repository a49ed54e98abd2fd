"""Time in one place: now in UTC, ISO 8601 as every envelope and JSON output writes it, and an agent's
time zone by name, with the rule every local-time figure shares: no zone or an unknown one is UTC, and
the reason is said."""

from __future__ import annotations

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
