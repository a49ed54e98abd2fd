"""The dashboard's pure parts: the upload health headers, the last evening peak's end, the page links."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from netprobe.dashboard.layout import target_href
from netprobe.net.upload_health import BadHealthHeader, health_headers, parse_health
from netprobe.report.windows import DEFAULT_WINDOW, HourWindow, last_window_end
from tests.support.dashboard import span_links

SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_health_headers_round_trip() -> None:
    sent = datetime(2026, 12, 3, 12, 0, 0, 123456, tzinfo=UTC)
    headers = health_headers(42, sent)
    assert headers == {"X-Netprobe-Outbox-Backlog": "42", "X-Netprobe-Sent-At": "2026-12-03T12:00:00.123Z"}
    got = parse_health(headers["X-Netprobe-Outbox-Backlog"], headers["X-Netprobe-Sent-At"])
    assert got.backlog == 42 and got.sent_at == datetime(2026, 12, 3, 12, 0, 0, 123000, tzinfo=UTC)
    assert got.offset_ms(datetime(2026, 12, 3, 12, 0, 1, 123000, tzinfo=UTC)) == pytest.approx(-1000.0)
    assert not parse_health(None, None).present


@pytest.mark.parametrize(("backlog", "sent_at", "named"), [
    ("-1", None, "X-Netprobe-Outbox-Backlog"), ("1.5", None, "X-Netprobe-Outbox-Backlog"),
    ("99999999999", None, "X-Netprobe-Outbox-Backlog"), (" 3", None, "X-Netprobe-Outbox-Backlog"),
    ("", None, "X-Netprobe-Outbox-Backlog"),
    (None, "2026-12-03T12:00:00+08:00", "X-Netprobe-Sent-At"),
    (None, "2026-13-03T12:00:00Z", "X-Netprobe-Sent-At"),
    (None, "1764763200", "X-Netprobe-Sent-At"), (None, "2026-12-03 12:00:00Z", "X-Netprobe-Sent-At"),
])
def test_malformed_health_headers_are_named(backlog: str | None, sent_at: str | None, named: str) -> None:
    with pytest.raises(BadHealthHeader, match=named):
        parse_health(backlog, sent_at)


@pytest.mark.parametrize(("now_local", "end_local"), [
    ((2026, 12, 3, 19, 59), (2026, 12, 2, 23, 0)),     # before tonight's peak: last night's
    ((2026, 12, 3, 21, 30), (2026, 12, 3, 21, 30)),    # during it: so far
    ((2026, 12, 3, 23, 0), (2026, 12, 3, 23, 0)),      # just after
    ((2026, 12, 4, 2, 0), (2026, 12, 3, 23, 0)),       # after midnight: the evening before
])
def test_last_evening_peak(now_local: tuple[int, ...], end_local: tuple[int, ...]) -> None:
    now = datetime(*now_local, tzinfo=SHANGHAI).astimezone(UTC)
    assert last_window_end(DEFAULT_WINDOW, SHANGHAI, now) == datetime(*end_local, tzinfo=SHANGHAI)
    with pytest.raises(ValueError, match="within one local day"):
        last_window_end(HourWindow(22, 2), SHANGHAI, now)


def test_links_are_quoted_and_carry_the_span() -> None:
    assert target_href("/np/", "sh ct", "hk/x", 30) == "/np/target/sh%20ct/hk%2Fx?days=30"
    links = span_links("/", ("target", "a", "b"), 7)
    assert '<a href="/target/a/b?days=7" class=here>7 days</a>' in links
    assert all(f"?days={d}" in links for d in (1, 7, 30, 90))
