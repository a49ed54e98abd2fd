"""An agent's time zone by name, with the rule every local-time figure shares: no zone or an unknown one
is UTC, and the reason is said."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone_of(name: str | None) -> tuple[ZoneInfo, str | None]:
    """The agent's zone, or UTC with the reason when it has none or an unknown one."""
    if not name:
        return ZoneInfo("UTC"), "no time zone recorded"
    try:
        return ZoneInfo(name), None
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC"), f"unknown time zone {name!r}"
