"""A chart's span in the agent's local time: its buckets (edges on the local clock, so a 6-hour bucket is
00–06, 06–12, … wherever the agent is, DST included), its time-axis ticks and its evening-peak
stretches. Hour rows fall into the bucket their start is in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from netprobe.report.windows import HourWindow

MAX_DAYS = 90
MAX_BUCKETS = 360             # ~2 px each on the chart: a 90-day span stays readable
_BUCKET_HOURS = (1, 2, 3, 6, 12, 24)
_TICK_HOURS = (1, 2, 3, 6, 12)
_TICK_DAYS = (1, 2, 7, 14, 28)  # 7 and up fall on Mondays
_MAX_TICKS = 8
_HOUR = timedelta(hours=1)


def bucket_hours(days: int) -> int:
    """The shortest bucket (hours) that keeps `days` within MAX_BUCKETS."""
    return next(b for b in _BUCKET_HOURS if days * 24 <= MAX_BUCKETS * b or b == _BUCKET_HOURS[-1])


def _local(d: date, hour: int, zone: ZoneInfo) -> datetime:
    """UTC instant of local d hour:00 (a time the clock skips is read with the offset before it)."""
    return datetime.combine(d, time(hour), tzinfo=zone).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Span:
    days: int
    zone: ZoneInfo
    bucket_hours: int
    edges: tuple[datetime, ...]     # UTC; bucket i is [edges[i], edges[i + 1])

    @property
    def start(self) -> datetime:
        return self.edges[0]

    @property
    def end(self) -> datetime:
        return self.edges[-1]

    @property
    def buckets(self) -> int:
        return len(self.edges) - 1

    def epochs(self) -> npt.NDArray[np.float64]:
        return np.array([e.timestamp() for e in self.edges])

    def bucket_of(self, starts: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
        """The bucket of each hour starting at `starts` (epoch seconds); −1 outside the span."""
        i = np.searchsorted(self.epochs(), starts, side="right") - 1
        return np.where((i >= 0) & (i < self.buckets), i, -1).astype(np.intp)

    def _dates(self) -> list[date]:
        first, last = self.start.astimezone(self.zone).date(), self.end.astimezone(self.zone).date()
        return [first + timedelta(days=k) for k in range((last - first).days + 1)]

    def ticks(self) -> list[tuple[datetime, str]]:
        """Time-axis ticks at round local times, at most _MAX_TICKS, with their labels."""
        hours = (self.end - self.start) / _HOUR
        out: list[tuple[datetime, str]] = []
        step_h = next((s for s in _TICK_HOURS if hours / s <= _MAX_TICKS), None)
        for d in self._dates():
            if step_h is not None:
                stamps = [(_local(d, h, self.zone), h) for h in range(0, 24, step_h)]
                out += [(at, f"{d:%a %m-%d}" if h == 0 else f"{h:02d}:00") for at, h in stamps]
                continue
            step_d = next((s for s in _TICK_DAYS if hours / (24 * s) <= _MAX_TICKS), _TICK_DAYS[-1])
            if (d.toordinal() - 1) % step_d == 0:
                out.append((_local(d, 0, self.zone), f"{d:%a %m-%d}" if step_d == 1 else f"{d:%m-%d}"))
        return [(at, label) for at, label in out if self.start <= at <= self.end]

    def stretches(self, window: HourWindow) -> list[tuple[datetime, datetime]]:
        """The local-time `window` on each day, clipped to the span."""
        out = []
        for d in self._dates():
            a = _local(d, window.start, self.zone)
            b = _local(d + timedelta(days=1) if window.end <= window.start else d, window.end, self.zone)
            a, b = max(a, self.start), min(b, self.end)
            if a < b:
                out.append((a, b))
        return out


def span_of(days: int, zone: ZoneInfo, now: datetime) -> Span:
    """The last `days` days (1 … MAX_DAYS) up to the end of the current hour, widened to whole
    buckets on the local clock."""
    days = min(max(days, 1), MAX_DAYS)
    b = bucket_hours(days)
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + _HOUR
    if b == 1:      # UTC hours: the hour rows themselves (a clock turned back repeats a local hour)
        return Span(days, zone, b, tuple(end - k * _HOUR for k in range(days * 24, -1, -1)))
    local_end = end.astimezone(zone).date()
    edges = sorted({_local(local_end - timedelta(days=k), h, zone)
                    for k in range(-1, days + 3) for h in range(0, 24, b)})
    last = next(e for e in edges if e >= end)
    first = max(e for e in edges if e <= end - timedelta(days=days))
    return Span(days, zone, b, tuple(e for e in edges if first <= e <= last))


__all__ = ["MAX_DAYS", "Span", "bucket_hours", "span_of"]
