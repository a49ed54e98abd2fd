"""Local-time windows: parsing, midnight crossing, the last N local days, DST transition days."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from netprobe.errors import UsageError
from netprobe.report.windows import HourWindow, LocalDays, last_days, zone_of
from tests.support.windows import days_start, in_days


def test_parse_and_contains() -> None:
    assert HourWindow.parse("20-23").hours == (20, 21, 22)
    assert HourWindow.parse(" 3 - 6 ").hours == (3, 4, 5)
    night = HourWindow.parse("22-2")
    assert night.hours == (0, 1, 22, 23)
    assert night.contains(23) and night.contains(0) and not night.contains(2) and not night.contains(21)
    assert HourWindow.parse("18-24").hours == (18, 19, 20, 21, 22, 23)
    assert HourWindow.parse("20-23").label == "20-23" and HourWindow(20, 23).clock() == "20:00–23:00"


@pytest.mark.parametrize("text", ["20", "20-", "a-b", "24-2", "3-25", "3-3", "0-24", "20-23-1"])
def test_bad_windows_name_the_option(text: str) -> None:
    with pytest.raises(UsageError, match="--offpeak"):
        HourWindow.parse(text, "--offpeak")


def _in_window(days: LocalDays, window: HourWindow, day_start: datetime, hours: int = 30) -> list[datetime]:
    """UTC hour starts from `day_start` on that belong to the window and to the days."""
    found = []
    for i in range(hours):
        h = day_start + timedelta(hours=i)
        if in_days(days, h) and window.contains(h.astimezone(days.zone).hour):
            found.append(h)
    return found


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def test_spring_forward_day_skips_the_missing_hour() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    day = last_days(berlin, 1, _utc(2026, 3, 29, 21, 59))          # 23:59 CEST, 2026-03-29
    assert (day.first, day.last) == (date(2026, 3, 29), date(2026, 3, 29))
    # 01:00 CET = 00:00Z; 02:00 does not exist; 03:00 CEST = 01:00Z
    assert _in_window(day, HourWindow(1, 4), _utc(2026, 3, 28, 20)) == [_utc(2026, 3, 29, 0),
                                                                         _utc(2026, 3, 29, 1)]
    evening = _in_window(day, HourWindow(20, 23), _utc(2026, 3, 28, 20))
    assert evening == [_utc(2026, 3, 29, 18), _utc(2026, 3, 29, 19), _utc(2026, 3, 29, 20)]
    # a 23-hour day: 0-23 holds local 00, 01, 03 … 22
    assert len(_in_window(day, HourWindow(0, 23), _utc(2026, 3, 28, 20))) == 22


def test_fall_back_day_repeats_an_hour() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    day = last_days(berlin, 1, _utc(2026, 10, 25, 22, 59))         # 23:59 CET, 2026-10-25
    # 01:00 CEST = 23:00Z (24th), 02:00 CEST = 00:00Z, 02:00 CET = 01:00Z, 03:00 CET = 02:00Z
    assert _in_window(day, HourWindow(1, 4), _utc(2026, 10, 24, 20)) == [
        _utc(2026, 10, 24, 23), _utc(2026, 10, 25, 0), _utc(2026, 10, 25, 1), _utc(2026, 10, 25, 2)]
    assert len(_in_window(day, HourWindow(2, 3), _utc(2026, 10, 24, 20))) == 2
    assert _in_window(day, HourWindow(20, 23), _utc(2026, 10, 24, 20)) == [
        _utc(2026, 10, 25, 19), _utc(2026, 10, 25, 20), _utc(2026, 10, 25, 21)]


def test_los_angeles_dst_and_cross_midnight_window() -> None:
    la = ZoneInfo("America/Los_Angeles")
    days = last_days(la, 2, _utc(2026, 3, 9, 12))                  # 05:00 PDT on 2026-03-09
    assert (days.first, days.last) == (date(2026, 3, 8), date(2026, 3, 9))
    # 22-2 on the 8th (PDT, UTC−7) and the small hours of the 8th (PST, UTC−8) and of the 9th (PDT)
    got = _in_window(days, HourWindow(22, 2), _utc(2026, 3, 8, 0), hours=40)
    assert got == [_utc(2026, 3, 8, 8), _utc(2026, 3, 8, 9),       # 00:00, 01:00 PST on the 8th
                   _utc(2026, 3, 9, 5), _utc(2026, 3, 9, 6),       # 22:00, 23:00 PDT on the 8th
                   _utc(2026, 3, 9, 7), _utc(2026, 3, 9, 8)]       # 00:00, 01:00 PDT on the 9th


def test_last_days_end_now_and_start_at_local_midnight() -> None:
    sh = ZoneInfo("Asia/Shanghai")
    now = _utc(2026, 3, 30, 10)                                    # 18:00 in Shanghai
    days = last_days(sh, 7, now)
    assert (days.first, days.last) == (date(2026, 3, 24), date(2026, 3, 30))
    assert in_days(days, _utc(2026, 3, 23, 16))                    # 00:00 on the 24th, local
    assert not in_days(days, _utc(2026, 3, 23, 15))                # 23:00 on the 23rd
    assert in_days(days, _utc(2026, 3, 30, 9)) and not in_days(days, _utc(2026, 3, 30, 10))
    assert days_start(days) <= _utc(2026, 3, 23, 16)
    # half-hour zones: the window follows the local clock hour at each UTC hour's start
    kolkata = last_days(ZoneInfo("Asia/Kolkata"), 1, _utc(2026, 3, 30, 18, 20))   # 23:50 IST
    assert _in_window(kolkata, HourWindow(20, 23), _utc(2026, 3, 29, 18)) == [
        _utc(2026, 3, 30, 15), _utc(2026, 3, 30, 16), _utc(2026, 3, 30, 17)]   # 20:30, 21:30, 22:30


def test_unknown_zone_falls_back_to_utc_with_a_reason() -> None:
    assert zone_of("Asia/Shanghai") == (ZoneInfo("Asia/Shanghai"), None)
    zone, why = zone_of("Mars/Olympus")
    assert zone == ZoneInfo("UTC") and why is not None and "Mars/Olympus" in why
    assert zone_of(None)[1] == "no time zone recorded"
    with pytest.raises(ValueError):
        last_days(zone, 0, _utc(2026, 1, 1))
