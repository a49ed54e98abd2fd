"""The dashboard's target page (docs/dashboard.md, `/target/AGENT_ID/TARGET_ID?days=N`): one agent × target
over the last N days — the smoke graph, the probes' figure tables (TCP, SSE: their specs' page
tables), path history per direction.

Reads only this pair's rows: its hour rows of the probes drawn (one primary-key range each) and its
route events; merging is NumPy on the hour rows' sketch bins (netprobe.store.pair_hours)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from html import escape
from typing import Any

import numpy as np

from netprobe.probes import REGISTRY
from netprobe.probes.base import PageFigure, PageTable
from netprobe.report.columns import NONE, UNITS, ms, pct
from netprobe.report.rows import rtt_probes
from netprobe.report.windows import DEFAULT_WINDOW, last_days
from netprobe.store import alert_events
from netprobe.store.alert_events import AlertEvent
from netprobe.store.hour_arrays import HourArrays, Window, figures
from netprobe.store.pair_hours import HourSeries, Pair, added, day_series, hour_series, pair
from netprobe.store.path_history import PathHistory, path_history
from netprobe.store.prefix_read import local_days
from netprobe.store.reads import Source
from netprobe.times import utc_now, zone_of

from . import smoke
from .alerts import alert_history_html
from .layout import target_href
from .paths import history_html
from .spans import Span, span_of

SPANS = (1, 7, 30, 90)
HISTORY_LIMIT = 50          # route events listed per direction


async def target_page(store: Source, agent_id: str, target_id: str, days: int, base: str,
                      now: datetime | None = None) -> tuple[str, str] | None:
    """(title, HTML fragment) of the pair's page over the last `days` days (clamped to 1 … 90) as of
    `now` (default: the clock); None when the agent has not measured that target. The title is plain
    text (the caller escapes it); the fragment's links are `{base}target/AGENT/TARGET?days=N` for the
    other spans."""
    now = now if now is not None else utc_now()
    found = await pair(store, agent_id, target_id)
    if found is None:
        return None
    zone, _ = zone_of(found.agent.timezone)
    span = span_of(days, zone, now)
    tables = page_tables()

    async def rest() -> tuple[dict[str, HourArrays], dict[str, PathHistory], list[AlertEvent]]:
        # the tabled probes over the last N local days as `report peak --days N` has them: from the
        # prefix rollups (a few rows whatever N is) and the hours after them
        local = last_days(zone, span.days, now)
        days: dict[str, HourArrays] = {}
        if tables:
            async with store.reading("reading rollups from") as conn:
                days = await local_days(conn, agent_id, zone, local.first, local.now, list(tables),
                                        [target_id])
        paths = await path_history(store, agent_id, target_id, span.start, HISTORY_LIMIT)
        return days, paths, await _alerts(store, agent_id, target_id, span.start, now)

    # on two connections: the small reads go on while the chart's hour rows are fetched and decoded
    rtt, (figured, history, alerts) = await asyncio.gather(_rtt_buckets(store, agent_id, target_id, span),
                                                           rest())
    title = f"{agent_id} → {target_id} · {span.days} day{'s' * (span.days != 1)}"
    parts = [_head(found, span, base), _graph(found, span, rtt)]
    if tables:
        shorts = [t.short for t in tables.values()]
        named = shorts[0] if len(shorts) == 1 else f"{', '.join(shorts[:-1])} and {shorts[-1]}"
        parts += [f"<h3>{escape(named)}, the last {span.days} local day{'s' * (span.days != 1)}</h3>",
                  _figures_html(tables, figured)]
    parts += ["<h3>Path history</h3>", history_html(history, zone, span.days),
             "<h3>Alerts</h3>", alert_history_html(alerts)]
    return title, f'<section class="target-page">{"".join(parts)}</section>'


async def _rtt_buckets(store: Source, agent_id: str, target_id: str, span: Span) -> tuple[str, Window] | None:
    """The span's buckets of the RTT source as the reports pick it (icmp, else an mtr trace's
    destination, …): the first probe with rows; the others are read only when it has none. Buckets of
    several hours come from the prefix rollups' days where they have them (a row per day rather than
    24 hour rows: a 90-day chart reads ~90 rows, not 2,160) and the hours after them."""
    n = span.buckets
    first, *others = rtt_probes()
    for probes in ([first], others):
        if span.bucket_hours > 1:
            for probe in probes:
                days = await day_series(store, agent_id, target_id, probe, span.zone,
                                        span.start.astimezone(span.zone).date(), span.end)
                if days is None:
                    continue
                merged = days.merged(span.zone, span.bucket_of, n)
                tails = await hour_series(store, agent_id, target_id, [probe], days.until, span.end)
                tail = tails.get(probe)
                if tail is not None:
                    merged = added(merged, tail.merged(span.bucket_of(tail.starts), n))
                return probe, merged
        series = await hour_series(store, agent_id, target_id, probes, span.start, span.end)
        found = next((p for p in probes if p in series), None)
        if found is not None:
            s = series[found]
            return found, s.merged(span.bucket_of(s.starts), n)
    return None


async def _alerts(store: Source, agent_id: str, target_id: str, since: datetime, now: datetime
                  ) -> list[AlertEvent]:
    """The pair's alert history in the span (the collector's Store keeps it; a plain reader has none)."""
    from netprobe.store.store import Store

    if not isinstance(store, Store):
        return []
    return await alert_events.history(store, agent_id, target_id, since, now + timedelta(seconds=1),
                                      limit=HISTORY_LIMIT)


def _head(p: Pair, span: Span, base: str) -> str:
    a, t = p.agent, p.target
    facts = [f"agent {a.id}", *(f"{k} {v}" for k, v in (("region", a.region), ("ISP", a.isp)) if v),
             f"time zone {span.zone.key}", f"target {t.host or t.id}",
             *(f"{k} {v}" for k, v in (("datacenter", t.datacenter), ("sold as", t.line)) if v)]
    links = []
    for d in SPANS:
        label = f"{d} day{'s' * (d != 1)}"
        if d == span.days:
            links.append(f'<strong aria-current="page">{label}</strong>')
        else:
            links.append(f'<a href="{escape(target_href(base, a.id, t.id, d))}">{label}</a>')
    return (f"<h2>{escape(a.id)} → {escape(t.id)}</h2><p class=\"facts\">{escape(' · '.join(facts))}</p>"
            f'<nav class="spans">span: {" | ".join(links)}</nav>')


def _graph(p: Pair, span: Span, rtt: tuple[str, Window] | None) -> str:
    n = span.buckets
    if rtt is None:
        empty = smoke.Buckets(np.full((n, len(smoke.QS)), np.nan), np.full(n, np.nan), np.zeros(n, np.int64))
        return f'<figure class="smoke">{smoke.chart(empty, span, _graph_title(p), "no")}</figure>'
    probe, buckets = rtt
    b = smoke.buckets_of(buckets)
    total = figures_of(HourSeries(np.zeros(n), buckets).merged(np.zeros(n, np.intp), 1))
    summary = (f"{probe} over the span: median {ms(total.get('rtt_p50_ms'))} ms, P95 "
               f"{ms(total.get('rtt_p95_ms'))} ms, loss {pct(total.get('loss_pct'))} %, "
               f"{total.get('rounds', 0)} rounds")
    return (f'<figure class="smoke">{smoke.chart(b, span, _graph_title(p), probe)}'
            f"<figcaption>{escape(summary)}</figcaption></figure>")


def _graph_title(p: Pair) -> str:
    line = f" ({p.target.line})" if p.target.line else ""
    return f"{p.agent.id} → {p.target.id}{line}"


def figures_of(w: Window) -> dict[str, Any]:
    """Rollup.figures of the window's first series (empty when it has no hour)."""
    if not len(w.hours) or not w.hours[0]:
        return {}
    lo, hi = w.ext[0, 0], w.ext[0, 1]
    return figures([w.sums(0)], [None if np.isnan(lo) else float(lo)],
                   [None if np.isnan(hi) else float(hi)])[0]


def page_tables() -> dict[str, PageTable]:
    """probe → its table on this page, in registry order (their specs' `page`)."""
    return {name: spec.page for name, spec in REGISTRY.items() if spec.page is not None}


def _cell(row: PageFigure, f: dict[str, Any]) -> str:
    if row.unit == "rounds":
        return f"{f['rounds']} ({f['error_rounds']})" if f else NONE
    return UNITS[row.unit](f.get(row.figure))


def _figures_html(tables: dict[str, PageTable], days: dict[str, HourArrays]) -> str:
    out = []
    for probe, table in tables.items():
        what = escape(table.title)
        arrays = days.get(probe)
        if arrays is None:
            out.append(f'<p class="none">{what}: not measured in these days</p>')
            continue
        every = figures_of(arrays.window(range(24)))
        peak = figures_of(arrays.window(DEFAULT_WINDOW.hours))
        head = (f"<tr><th>{what}</th><th>all hours</th>"
                f"<th>evening peak {DEFAULT_WINDOW.clock()}</th></tr>")
        cells = [(row.label, _cell(row, every), _cell(row, peak)) for row in table.rows]
        body = "".join(f"<tr><th>{escape(name)}</th><td>{a}</td><td>{b}</td></tr>"
                       for name, a, b in cells if (a, b) != (NONE, NONE))
        out.append(f'<table class="figures" data-probe="{escape(probe)}">{head}{body}</table>')
    return "".join(out)


__all__ = ["SPANS", "target_page"]
