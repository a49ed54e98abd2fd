"""The target page's time maths: buckets on the agent's local clock (DST and half-hour zones), ticks,
evening-peak stretches; the hop diff of a path change; links to other spans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from netprobe.dashboard.layout import target_href as span_link
from netprobe.dashboard.paths import Step, hop_diff
from netprobe.dashboard.spans import bucket_hours, span_of
from netprobe.report.windows import DEFAULT_WINDOW

H = timedelta(hours=1)


def test_bucket_sizes_keep_90_days_readable() -> None:
    assert [bucket_hours(d) for d in (1, 7, 30, 90)] == [1, 1, 2, 6]
    for d in range(1, 91):
        assert d * 24 / bucket_hours(d) <= 360


def test_hourly_spans_are_the_last_utc_hours_up_to_the_current_one() -> None:
    now = datetime(2026, 11, 20, 12, 34, tzinfo=UTC)
    span = span_of(1, ZoneInfo("Asia/Kolkata"), now)
    assert span.buckets == 24 and span.end == datetime(2026, 11, 20, 13, tzinfo=UTC)
    assert span.start == span.end - 24 * H
    starts = np.array([(span.start + k * H).timestamp() for k in (-1, 0, 23, 24)])
    assert span.bucket_of(starts).tolist() == [-1, 0, 23, -1]


def test_six_hour_buckets_follow_the_local_clock_across_a_dst_change() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 4, 10, 9, 15, tzinfo=UTC)             # CEST (UTC+2) since 2026-03-29
    span = span_of(90, berlin, now)
    local = [e.astimezone(berlin) for e in span.edges]
    assert all(t.minute == 0 and t.hour in (0, 6, 12, 18) for t in local)
    assert span.edges[0] <= now - timedelta(days=90) < span.edges[1]
    assert span.edges[-2] < now.replace(minute=0) + H <= span.edges[-1]
    lengths = {(b - a) / H for a, b in zip(span.edges, span.edges[1:], strict=False)}
    assert lengths == {5.0, 6.0}                              # the spring-forward night's bucket is short
    # an hour row belongs to the bucket its start is in: 05:00 UTC on 2026-04-01 is 07:00 CEST
    i = int(span.bucket_of(np.array([datetime(2026, 4, 1, 5, tzinfo=UTC).timestamp()]))[0])
    assert span.edges[i].astimezone(berlin) == datetime(2026, 4, 1, 6, tzinfo=berlin)


def test_two_hour_buckets_in_a_half_hour_zone_start_on_its_clock() -> None:
    kolkata = ZoneInfo("Asia/Kolkata")                        # UTC+5:30
    span = span_of(30, kolkata, datetime(2026, 11, 20, 12, 34, tzinfo=UTC))
    assert span.bucket_hours == 2
    assert all(e.astimezone(kolkata).minute == 0 and e.astimezone(kolkata).hour % 2 == 0 for e in span.edges)


def test_ticks_are_round_local_times() -> None:
    shanghai = ZoneInfo("Asia/Shanghai")
    now = datetime(2026, 11, 20, 12, 34, tzinfo=UTC)
    day = span_of(1, shanghai, now).ticks()
    assert [label for _, label in day] == ["21:00", "Fri 11-20", "03:00", "06:00", "09:00", "12:00", "15:00",
                                           "18:00", "21:00"]
    assert day[1][0] == datetime(2026, 11, 19, 16, tzinfo=UTC)
    week = span_of(7, shanghai, now).ticks()
    assert len(week) == 7 and all(at.astimezone(shanghai).hour == 0 for at, _ in week)
    quarter = span_of(90, shanghai, now).ticks()
    assert 4 <= len(quarter) <= 8 and all(at.astimezone(shanghai).weekday() == 0 for at, _ in quarter)


def test_evening_peak_stretches_are_local_and_clipped() -> None:
    shanghai = ZoneInfo("Asia/Shanghai")
    span = span_of(1, shanghai, datetime(2026, 11, 20, 12, 34, tzinfo=UTC))   # ends 21:00 local
    assert span.stretches(DEFAULT_WINDOW) == [
        (datetime(2026, 11, 19, 13, tzinfo=UTC), datetime(2026, 11, 19, 15, tzinfo=UTC)),   # from 21:00 on
        (datetime(2026, 11, 20, 12, tzinfo=UTC), datetime(2026, 11, 20, 13, tzinfo=UTC))]   # until 21:00


def test_hop_diff_counts_hops_removed_and_added() -> None:
    before = [["10.0.0.1"], ["100.64.0.1"], [], ["59.43.1.1"], ["198.18.0.2"]]
    after = [["10.0.0.1"], ["100.64.0.1"], ["202.97.12.1"], ["202.97.50.1"], ["59.43.1.1"], ["198.18.0.2"]]
    d = hop_diff(before, after)
    assert (d.added, d.removed) == (2, 1)
    assert d.steps == [Step("same", 2), Step("~", 3, "???", "202.97.12.1"), Step("+", 4, after="202.97.50.1"),
                       Step("same", 2)]
    ecmp = hop_diff([["a"], ["b"]], [["a"], ["b", "c"]])
    assert ecmp.steps == [Step("same", 1), Step("~", 2, "b", "b c")] and (ecmp.added, ecmp.removed) == (1, 1)
    shorter = hop_diff(before, before[:2] + before[3:])
    assert shorter.steps == [Step("same", 2), Step("-", 3, before="???"), Step("same", 2)]
    assert hop_diff(before, before).steps == [Step("same", 5)]


def test_span_links_quote_the_ids() -> None:
    assert span_link("/dash/", "sh ct/1", "hk&cn2", 30) == "/dash/target/sh%20ct%2F1/hk%26cn2?days=30"
    assert span_link("/", "a", "b", 1) == "/target/a/b?days=1"
