"""Local-time window maths: hour windows (`20-23`, `22-2`) and the last N local calendar days.

Rules (docs/reports.md):
- A window is local clock hours, half-open: `20-23` is 20:00 ≤ t < 23:00; `22-2` crosses midnight.
- An hourly rollup (a UTC hour) belongs to a window when the local clock hour at its start is in the
  window. So DST needs no special case: on a spring-forward day a window over the skipped hour is one
  hour shorter, on a fall-back day one over the repeated hour is one longer, and an evening window
  always holds its three hours.
- The last N days are the local calendar days from today back N − 1 days: an hour belongs to them when
  the local date at its start is one of those days and it started before now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from netprobe.errors import UsageError
from netprobe.times import zone_of as zone_of

_WINDOW = re.compile(r"\s*(\d{1,2})\s*-\s*(\d{1,2})\s*")


@dataclass(frozen=True, slots=True)
class HourWindow:
    """Local hours start ≤ h < end, wrapping past midnight when end ≤ start."""

    start: int        # 0..23
    end: int          # 0..23 (24 is stored as 0)

    def __post_init__(self) -> None:
        if not (0 <= self.start <= 23 and 0 <= self.end <= 23) or self.start == self.end:
            raise ValueError(f"bad hour window {self.start}-{self.end}")

    @classmethod
    def parse(cls, text: str, option: str = "--window") -> HourWindow:
        """`START-END` in whole local hours, e.g. `20-23` or `22-2`; END may be 24."""
        m = _WINDOW.fullmatch(text)
        if m is None:
            raise UsageError(f"{option}: expected START-END in local hours (e.g. 20-23 or 22-2), "
                             f"got {text!r}")
        start, end = int(m.group(1)), int(m.group(2))
        if start > 23 or end > 24:
            raise UsageError(f"{option}: hours are 0-23 (END may be 24), got {text!r}")
        if start == end % 24:
            raise UsageError(f"{option}: START and END are the same hour, the window would be empty "
                             f"or the whole day: {text!r}")
        return cls(start, end % 24)

    def contains(self, hour: int) -> bool:
        if self.start < self.end:
            return self.start <= hour < self.end
        return hour >= self.start or hour < self.end

    @property
    def hours(self) -> tuple[int, ...]:
        return tuple(h for h in range(24) if self.contains(h))

    @property
    def label(self) -> str:
        """As typed on the command line: `20-23`."""
        return f"{self.start}-{self.end}"

    def clock(self) -> str:
        """For people: `20:00–23:00`."""
        return f"{self.start:02d}:00–{self.end:02d}:00"


DEFAULT_WINDOW = HourWindow(20, 23)
DEFAULT_OFFPEAK = HourWindow(3, 6)


def window_of(value: HourWindow | str, option: str) -> HourWindow:
    return value if isinstance(value, HourWindow) else HourWindow.parse(value, option)


@dataclass(frozen=True, slots=True)
class LocalDays:
    """The last `days` local calendar days of one zone, ending at `now`."""

    zone: ZoneInfo
    first: date
    last: date                  # today, local
    now: datetime               # UTC


def last_days(zone: ZoneInfo, days: int, now: datetime) -> LocalDays:
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    today = now.astimezone(zone).date()
    return LocalDays(zone=zone, first=today - timedelta(days=days - 1), last=today, now=now.astimezone(UTC))


def last_window_end(window: HourWindow, zone: ZoneInfo, now: datetime) -> datetime:
    """The end of `window`'s latest occurrence that has begun by `now` (UTC), capped at `now`: a peak in
    progress counts so far. For a window within one local day (`20-23`); used with last_days(…, 1, end),
    whose day is the window's."""
    if window.end <= window.start:
        raise ValueError(f"a window within one local day is needed, got {window.label}")
    local = now.astimezone(zone)
    day = local.date() if local.hour >= window.start else local.date() - timedelta(days=1)
    end = datetime.combine(day, time(window.end), tzinfo=zone).astimezone(UTC)
    return min(end, now.astimezone(UTC))
