"""The overview: each region's candidate targets ranked at the last evening peak (DESIGN §11).

The rows are `report peak`'s (netprobe.report.peak.compute, its ranking and SLO attainment), over one
local day ending where each agent's last peak ends, the peak window alone: only those hours' rollups
are read and merged, a few rows per series, by the store's queries. Agents are grouped by time zone,
since the last peak ends at one instant per zone."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from netprobe.dashboard.layout import bar, e, table, target_href
from netprobe.report.columns import NONE, back, detected, ms, pct, share
from netprobe.report.peak import compute
from netprobe.report.ranking import RULE, rank_rows
from netprobe.report.rows import PeakRow
from netprobe.report.run import slo_request
from netprobe.report.slo import DEFAULT_SLO_TTFT_MS
from netprobe.report.windows import DEFAULT_WINDOW, last_window_end, zone_of
from netprobe.store import fleet
from netprobe.store.dashboard import firing_alerts
from netprobe.store.reads import Source


async def last_peak_rows(store: Source, now: datetime) -> tuple[list[PeakRow], dict[str, datetime]]:
    """Rows at each agent's last evening peak, ranked within regions; and per time zone its peak's end."""
    agents = await fleet.load_agents(store)
    zones: dict[str, list[str]] = defaultdict(list)
    for info in agents.values():
        zones[str(zone_of(info.timezone)[0].key)].append(info.id)
    rows: list[PeakRow] = []
    ends: dict[str, datetime] = {}
    slo = slo_request(DEFAULT_SLO_TTFT_MS, drawn=False)
    for zone_name, ids in sorted(zones.items()):
        end = ends[zone_name] = last_window_end(DEFAULT_WINDOW, zone_of(zone_name)[0], now)
        report = await compute(store, 1, DEFAULT_WINDOW, now=end, peak_only=True, slo=slo, agent_ids=set(ids))
        rows += report.rows
    pairs = sorted({(r.agent, r.target) for r in rows})
    fwd = await fleet.detected_lines(store, pairs, now)
    ret = await fleet.detected_lines(store, pairs, now, "return")
    rows = [replace(r, detected_line=fwd[k].label if (k := (r.agent, r.target)) in fwd else None,
                    return_line=ret[k].label if k in ret else None) for r in rows]
    return rank_rows(rows), ends


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


async def overview_page(store: Source, base: str, now: datetime) -> tuple[str, str]:
    rows, ends = await last_peak_rows(store, now)
    alerts = await firing_alerts(store)
    title = "Evening peak ranking"
    peaks = "; ".join(f"{zone}: {end.astimezone(zone_of(zone)[0]):%Y-%m-%d} {DEFAULT_WINDOW.clock()}"
                      f"{' (so far)' if end == now else ''}" for zone, end in ends.items())
    parts = [f"<h1>{e(title)}</h1>",
             f'<p class="note">Each agent\'s last evening peak, local time ({e(peaks or "no agents yet")}). '
             f"{e(RULE)}. SLO %: share of requests whose first token arrives within "
             f"{DEFAULT_SLO_TTFT_MS:g} ms (DESIGN §10). Bars: peak P95 on the region's scale, green below "
             "0.1 % loss, amber below 1 %, red from 1 %. A target's page has its history.</p>"]
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
