"""What an agent's uplink tells the collector about itself on each upload, in request headers (so an
older collector ignores them): its outbox backlog and its clock at send time. The collector estimates
the agent's clock offset from the latter: sent_at − received_at is the offset minus the upload's
one-way time, so the figure is good to ± that time (a few ms on a LAN, tens across the Pacific)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

BACKLOG_HEADER = "X-Netprobe-Outbox-Backlog"    # rounds in the outbox when this upload left, it included
SENT_AT_HEADER = "X-Netprobe-Sent-At"            # the agent's clock then: RFC 3339 UTC, e.g. …T12:00:00.123Z

_BACKLOG = re.compile(r"[0-9]{1,10}")
_SENT_AT = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z")
MAX_BACKLOG = 2**31 - 1


class BadHealthHeader(ValueError):
    """A header present but not as specified; the message names it."""


@dataclass(frozen=True, slots=True)
class UploadHealth:
    backlog: int | None
    sent_at: datetime | None

    def offset_ms(self, received_at: datetime) -> float | None:
        """The agent's clock minus the collector's (± the upload's one-way time)."""
        if self.sent_at is None:
            return None
        return (self.sent_at - received_at).total_seconds() * 1000.0

    @property
    def present(self) -> bool:
        return self.backlog is not None or self.sent_at is not None


def health_headers(backlog: int, now: datetime) -> dict[str, str]:
    """The agent's side."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {BACKLOG_HEADER: str(max(0, min(backlog, MAX_BACKLOG))), SENT_AT_HEADER: stamp}


def parse_health(backlog: str | None, sent_at: str | None) -> UploadHealth:
    """The collector's side: each header absent (an older agent) or exactly as health_headers writes it."""
    count: int | None = None
    if backlog is not None:
        if not _BACKLOG.fullmatch(backlog) or int(backlog) > MAX_BACKLOG:
            raise BadHealthHeader(f"{BACKLOG_HEADER}: expected a whole number of rounds from 0 to "
                                  f"{MAX_BACKLOG}, got {backlog[:40]!r}")
        count = int(backlog)
    when: datetime | None = None
    if sent_at is not None:
        m = _SENT_AT.fullmatch(sent_at)
        try:
            if m is None:
                raise ValueError("not RFC 3339 UTC")
            year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
            micro = int((m.group(7) or "0").ljust(6, "0"))
            when = datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        except ValueError:
            raise BadHealthHeader(f"{SENT_AT_HEADER}: expected an RFC 3339 UTC time such as "
                                  f"2026-12-03T12:00:00.123Z, got {sent_at[:40]!r}") from None
    return UploadHealth(count, when)
