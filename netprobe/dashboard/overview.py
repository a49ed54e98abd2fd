"""The overview: each region's candidate targets ranked at the last evening peak (docs/dashboard.md).

The rows are `report peak`'s (netprobe.report.peak.compute, its ranking and SLO attainment), over one
local day ending where each agent's last peak ends, the peak window alone: only those hours' rollups
are read and merged, a few rows per series, by the store's queries. Agents are grouped by time zone,
since the last peak ends at one instant per zone."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from netprobe.dashboard.layout import bar, e, table, target_href
from netprobe.logs import log_event
from netprobe.report.columns import NONE, back, detected, ms, pct, share
from netprobe.report.peak import compute
from netprobe.report.ranking import RULE, rank_rows
from netprobe.report.rows import PeakRow
from netprobe.report.slo import DEFAULT_SLO_TTFT_MS, slo_request
from netprobe.report.windows import DEFAULT_WINDOW, last_window_end, zone_of
from netprobe.store import fleet
from netprobe.store.dashboard import firing_alerts
from netprobe.store.reads import Source

REFRESH_S = 60.0
log = logging.getLogger("netprobe.dashboard")


@dataclass(frozen=True, slots=True)
class PeakRows:
    rows: list[PeakRow]                  # ranked within regions
    ends: dict[str, datetime]            # per time zone, the end of the peak its rows are from
    computed_at: datetime
    compute_s: float                     # what computing them cost (wall)


async def last_peak_rows(store: Source, now: datetime) -> PeakRows:
    """Rows at each agent's last evening peak, ranked within regions. A peak in progress counts so far;
    one that has no rollups yet (its first minutes) gives way to the evening before."""
    t0 = time.perf_counter()
    agents = await fleet.load_agents(store)
    zones: dict[str, list[str]] = defaultdict(list)
    for info in agents.values():
        zones[str(zone_of(info.timezone)[0].key)].append(info.id)
    rows: list[PeakRow] = []
    ends: dict[str, datetime] = {}
    slo = slo_request(DEFAULT_SLO_TTFT_MS, drawn=False)
    for zone_name, ids in sorted(zones.items()):
        zone = zone_of(zone_name)[0]
        end = last_window_end(DEFAULT_WINDOW, zone, now)
        report = await compute(store, 1, DEFAULT_WINDOW, now=end, peak_only=True, slo=slo, agent_ids=set(ids))
        if not report.rows and end == now:
            start = end.astimezone(zone).replace(hour=DEFAULT_WINDOW.start, minute=0, second=0, microsecond=0)
            end = last_window_end(DEFAULT_WINDOW, zone, start - timedelta(microseconds=1))
            report = await compute(store, 1, DEFAULT_WINDOW, now=end, peak_only=True, slo=slo,
                                   agent_ids=set(ids))
        ends[zone_name] = end
        rows += report.rows
    pairs = sorted({(r.agent, r.target) for r in rows})
    fwd = await fleet.detected_lines(store, pairs, now)
    ret = await fleet.detected_lines(store, pairs, now, "return")
    rows = [replace(r, detected_line=fwd[k].label if (k := (r.agent, r.target)) in fwd else None,
                    return_line=ret[k].label if k in ret else None) for r in rows]
    return PeakRows(rank_rows(rows), ends, now, time.perf_counter() - t0)


def _log_failure(task: asyncio.Task[PeakRows]) -> None:
    exc = None if task.cancelled() else task.exception()
    if exc is not None:       # the rows computed before stay; the next stale request tries again
        log_event(log, "error", "dashboard: the overview's figures could not be recomputed", error=repr(exc))


class PeakSnapshot:
    """The overview's rows, recomputed at most every `every` seconds (stale while revalidating): computing
    them costs a fleet's whole peak, and they change only as uploads land in the window. A request gets
    the rows computed last; one that finds them older than `every` starts a recomputation in the
    background. Only the first request (or one after an error) waits for a computation."""

    def __init__(self, store: Source, every: float = REFRESH_S) -> None:
        self._store = store
        self.every = every
        self._current: PeakRows | None = None
        self._refreshing: asyncio.Task[PeakRows] | None = None

    async def get(self, now: datetime) -> PeakRows:
        current = self._current
        stale = current is None or (now - current.computed_at).total_seconds() > self.every
        if stale and self._refreshing is None:
            self._refreshing = task = asyncio.ensure_future(self._refresh(now))
            task.add_done_callback(_log_failure)
        if current is None:
            assert self._refreshing is not None
            return await asyncio.shield(self._refreshing)
        return current

    async def _refresh(self, now: datetime) -> PeakRows:
        try:
            self._current = got = await last_peak_rows(self._store, now)
            return got
        finally:
            self._refreshing = None

    async def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.gather(self._refreshing, return_exceptions=True)


def _line(row: PeakRow) -> str:
    parts = [e(row.line or NONE)]
    if row.detected_line is not None:
        parts.append(f"→ {e(detected(row))}")
    if row.return_line is not None:
        parts.append(f"↩ {e(back(row))}")
    return " ".join(parts)


def _row(row: PeakRow, alerts: list[str], base: str, top: float) -> list[str]:
    link = f'<a href="{e(target_href(base, row.agent, row.target))}">{e(row.target)}</a>'
    firing = f'<span class="bad">{e(", ".join(alerts))}</span>' if alerts else NONE
    return [NONE if row.rank is None else str(row.rank), link, e(row.agent), e(row.datacenter or NONE),
            _line(row), ms(row.peak.rtt_p95_ms), bar(row.peak.rtt_p95_ms, top, row.peak.loss_pct),
            pct(row.peak.loss_pct),
            share(row.slo.attainment_pct if row.slo is not None else None), firing]


_HEADS = (("rank", True), ("target", False), ("agent", False), ("dc", False),
          ("line (declared → forward ↩ return)", False), ("peak P95 ms", True), ("", False), ("loss %", True),
          (f"SLO % ≤ {DEFAULT_SLO_TTFT_MS:g} ms", True), ("firing alerts", False))


async def overview_page(store: Source, base: str, now: datetime,
                        snapshot: PeakSnapshot | None = None) -> tuple[str, str]:
    """`snapshot`: the rows as last computed (PeakSnapshot); None computes them for this request.
    Firing alerts are read for each request."""
    peak = await snapshot.get(now) if snapshot is not None else await last_peak_rows(store, now)
    rows, ends = peak.rows, peak.ends
    alerts = await firing_alerts(store)
    title = "Evening peak ranking"
    peaks = "; ".join(f"{zone}: {end.astimezone(zone_of(zone)[0]):%Y-%m-%d} {DEFAULT_WINDOW.clock()}"
                      f"{' (so far)' if end == peak.computed_at else ''}" for zone, end in ends.items())
    parts = [f"<h1>{e(title)}</h1>",
             f'<p class="note">Each agent\'s last evening peak, local time ({e(peaks or "no agents yet")}). '
             f"{e(RULE)}. SLO %: share of requests whose first token arrives within "
             f"{DEFAULT_SLO_TTFT_MS:g} ms. Bars: peak P95 on the region's scale, green below "
             "0.1 % loss, amber below 1 %, red from 1 %. A target's page has its history. Figures computed "
             f"{peak.computed_at:%H:%M:%S} UTC in {peak.compute_s * 1000:.0f} ms"
             f"{f', recomputed at most every {snapshot.every:g} s' if snapshot is not None else ''}; "
             "alerts as of now.</p>"]
    by_region: dict[str, list[PeakRow]] = defaultdict(list)
    for row in rows:
        by_region[row.region or NONE].append(row)
    if not rows:
        parts.append("<p>No hourly rollups at the last evening peak yet: agents' rounds appear here once "
                     "uploaded.</p>")
    for region, members in by_region.items():
        parts.append(f"<h2>Region {e(region)}</h2>")
        top = max((r.peak.rtt_p95_ms for r in members if r.peak.rtt_p95_ms is not None), default=0.0)
        cells = (_row(r, alerts.get((r.agent, r.target), []), base, top) for r in members)
        parts.append(table(_HEADS, cells))
    firing_elsewhere = sorted(k for k in alerts if k not in {(r.agent, r.target) for r in rows})
    if firing_elsewhere:
        parts.append("<h2>Firing alerts without peak figures</h2>")
        parts.append(table((("agent", False), ("target", False), ("rules", False)),
                           ([e(a), f'<a href="{e(target_href(base, a, t))}">{e(t)}</a>',
                             f'<span class="bad">{e(", ".join(alerts[(a, t)]))}</span>']
                            for a, t in firing_elsewhere)))
    return title, "".join(parts)
