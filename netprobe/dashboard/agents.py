"""The agents page: each agent's last upload, outbox backlog and clock offset (docs/dashboard.md)."""

from __future__ import annotations

from datetime import datetime, timedelta

from netprobe.dashboard.layout import e, table
from netprobe.report.columns import NONE
from netprobe.store.dashboard import AgentHealth, agents_health
from netprobe.store.reads import Source

STALE = timedelta(minutes=5)        # no upload for this long: marked (agents upload every few seconds)
OFFSET_WARN_MS = 1000.0             # a clock this far off skews rounds' times across agents


def ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "never"
    s = max(0, int((now - then).total_seconds()))
    text = f"{s} s" if s < 120 else f"{s // 60} min" if s < 7200 else f"{s // 3600} h" if s < 172800 \
        else f"{s // 86400} d"
    return f'<span title="{then:%Y-%m-%d %H:%M:%S} UTC">{text} ago</span>'


def _offset(h: AgentHealth) -> str:
    if h.clock_offset_ms is None:
        return NONE
    text = f"{h.clock_offset_ms:+.0f} ms"
    return f'<span class="warn">{text}</span>' if abs(h.clock_offset_ms) >= OFFSET_WARN_MS else text


def _row(h: AgentHealth, now: datetime) -> list[str]:
    seen = ago(h.last_seen, now)
    if h.last_seen is None or now - h.last_seen > STALE:
        seen = f'<span class="bad">{seen}</span>'
    backlog = NONE if h.outbox_backlog is None else f"{h.outbox_backlog:,}"
    token = h.token if h.token == "live" else f'<span class="warn">{e(h.token)}</span>'
    return [e(h.id), e(h.region or NONE), e(h.isp or NONE), e(h.timezone or NONE), seen, backlog,
            _offset(h), ago(h.health_at, now) if h.health_at is not None else NONE, token]


_HEADS = (("agent", False), ("region", False), ("isp", False), ("time zone", False), ("last seen", False),
          ("outbox backlog", True), ("clock offset", True), ("reported", False), ("token", False))


async def agents_page(store: Source, now: datetime) -> tuple[str, str]:
    health = await agents_health(store)
    title = "Agents"
    note = ("<p class=\"note\">Last seen: the last upload stored (to a minute). Outbox backlog: rounds the "
            "agent holds for upload, as its last upload reported. Clock offset: the agent's clock minus "
            "the collector's, from the upload's send time, good to ± the upload's one-way time. "
            "— : its uplink does not report it.</p>")
    if not health:
        return title, f"<h1>{title}</h1><p>No agents yet: `netprobe collector add-agent` issues tokens.</p>"
    return title, f"<h1>{title}</h1>{note}{table(_HEADS, (_row(h, now) for h in health))}"
