"""The evening-peak report (DESIGN §5): per agent × target, peak vs off-peak figures in the agent's
own time zone, merged from the hourly rollups' sketches (never from raw rounds, so it outlives raw
retention)."""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from netprobe.stats import loss_pct
from netprobe.store import fleet
from netprobe.store.prefix import COUNTERS, Extremes, Sums, combine, figures, quantiles
from netprobe.store.store import Store
from netprobe.times import iso, utc_now

from .ranking import RULE, rank_rows
from .rows import (
    Degradation,
    HourProfile,
    MergedHours,
    PeakRow,
    WindowFigures,
    WorstHour,
    figure_probes,
    rtt_probes,
)
from .windows import DEFAULT_OFFPEAK, DEFAULT_WINDOW, HourWindow, LocalDays, last_days, window_of, zone_of

DEFAULT_DAYS = 7


@dataclass(frozen=True, slots=True)
class PeakReport:
    rows: list[PeakRow]
    days: int
    window: HourWindow
    offpeak: HourWindow
    generated_at: datetime
    agent: str | None = None
    region: str | None = None
    warnings: list[str] = field(default_factory=list)
    note: str | None = None          # shown above the figures (the demo: time is compressed)

    def to_dict(self) -> dict[str, Any]:
        return {"generated_at": iso(self.generated_at), "note": self.note, "days": self.days,
                "window": self.window.label,
                "offpeak_window": self.offpeak.label, "agent": self.agent, "region": self.region,
                "ranking": RULE, "warnings": list(self.warnings), "rows": [r.to_dict() for r in self.rows]}


# -- computing ----------------------------------------------------------------------------------------
Entry = tuple[dict[int, Sums], dict[int, Extremes]]     # one series: sums and extremes by local hour
_COUNTER = {name: i for i, name in enumerate(COUNTERS)}


def _merged(entry: Entry | None, hours: Iterable[int]) -> MergedHours | None:
    """The hours of day `hours` of one series, merged (exact min/max from the extremes)."""
    if entry is None:
        return None
    sums, ext = entry
    picked = [h for h in hours if h in sums and sums[h].hours]
    if not picked:
        return None
    if len(picked) == 1:
        return MergedHours(sums[picked[0]], ext.get(picked[0]))
    e: Extremes | None = None
    for h in picked:
        e = combine(e, ext.get(h))
    return MergedHours(Sums.total([sums[h] for h in picked]), e)


def _window(rtt: MergedHours | None, others: Mapping[str, MergedHours | None]) -> WindowFigures:
    """`others`: the figure probes' merged hours, by probe."""
    w = figures(rtt.sums, rtt.lo, rtt.hi) if rtt else None
    extra: dict[str, float | None] = {}
    for probe, pairs in figure_probes().items():
        m = others.get(probe)
        got = figures(m.sums, m.lo, m.hi) if m else None
        for name, figure in pairs:
            extra[name] = got[figure] if got else None
    return WindowFigures(
        rtt_p50_ms=w["rtt_p50_ms"] if w else None, rtt_p95_ms=w["rtt_p95_ms"] if w else None,
        rtt_p99_ms=w["rtt_p99_ms"] if w else None, jitter_ms=w["jitter_ms"] if w else None,
        loss_pct=w["loss_pct"] if w else None, rounds=w["rounds"] if w else 0,
        hours=rtt.hours if rtt else 0, samples=w["samples"] if w else 0, extra=extra, merged=rtt)


def _worst_hour(rtt: MergedHours | None, zone: ZoneInfo) -> WorstHour | None:
    e = rtt.extremes if rtt else None
    if e is None or e[2] is None:
        return None
    return WorstHour(datetime.fromtimestamp(e[3], UTC).astimezone(zone), e[2])


def _delta(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _degradation(peak: WindowFigures, off: WindowFigures) -> Degradation:
    ratio = (peak.rtt_p95_ms / off.rtt_p95_ms
             if peak.rtt_p95_ms is not None and off.rtt_p95_ms else None)
    return Degradation(rtt_p50_delta_ms=_delta(peak.rtt_p50_ms, off.rtt_p50_ms),
                       rtt_p95_delta_ms=_delta(peak.rtt_p95_ms, off.rtt_p95_ms), rtt_p95_ratio=ratio,
                       jitter_delta_ms=_delta(peak.jitter_ms, off.jitter_ms),
                       loss_delta_pct=_delta(peak.loss_pct, off.loss_pct))


def _profile(rtt: Entry | None) -> tuple[HourProfile, ...]:
    out = []
    for h in range(24):
        m = _merged(rtt, (h,))
        if m is None:
            out.append(HourProfile(h, None, None, None, None, 0))
            continue
        s, lo, hi = m.sums, m.lo, m.hi
        sent, received, rounds = (round(s.c[_COUNTER[n]]) for n in ("sent", "received", "rounds"))
        p5, p50, p95 = quantiles(s, (0.05, 0.50, 0.95), lo, hi)
        out.append(HourProfile(h, p5, p50, p95, loss_pct(sent, received) if sent else None, rounds))
    return tuple(out)


def _row(agent: fleet.AgentInfo, zone: ZoneInfo, target_id: str, target: fleet.TargetInfo | None,
         by_probe: dict[str, Entry], window: HourWindow, offpeak: HourWindow | None) -> PeakRow:
    rtt_probe = next((p for p in rtt_probes() if p in by_probe), None)
    rtt = by_probe.get(rtt_probe) if rtt_probe else None
    others = {p: by_probe.get(p) for p in figure_probes()}
    rtt_peak = _merged(rtt, window.hours)
    peak = _window(rtt_peak, {p: _merged(e, window.hours) for p, e in others.items()})
    off = _window(None, {}) if offpeak is None else \
        _window(_merged(rtt, offpeak.hours), {p: _merged(e, offpeak.hours) for p, e in others.items()})
    return PeakRow(agent=agent.id, region=agent.region, timezone=str(zone.key), target=target_id,
                   datacenter=target.datacenter if target else None, line=target.line if target else None,
                   detected_line=None, rtt_probe=rtt_probe, peak=peak, offpeak=off,
                   worst_hour=_worst_hour(rtt_peak, zone), degradation=_degradation(peak, off),
                   profile=_profile(rtt) if offpeak is not None else ())


async def _agent_series(store: Store, agent: str, local: LocalDays, known_targets: Iterable[str],
                        windows: Sequence[HourWindow], profile: bool) -> dict[str, dict[str, Entry]]:
    """Per target, per probe: what the report reads of one agent's local days. The RTT probe by every
    hour of day for the profile, else only in the windows, as tcp and sse; mtr only where there is no
    icmp."""
    in_windows = sorted({h for w in windows for h in w.hours})
    rtt, figured = rtt_probes(), [p for p in figure_probes() if p not in rtt_probes()]
    only = dict.fromkeys(figured, in_windows) | ({} if profile else dict.fromkeys(rtt, in_windows))
    got = await store.local_days(agent, local.zone, local.first, local.now, (*rtt[:1], *figured),
                                 hours_of_day=only)
    with_first = {t for t, p in got if rtt and p == rtt[0]}
    others = sorted(set(known_targets) - with_first)
    if others and rtt[1:]:
        got.update(await store.local_days(agent, local.zone, local.first, local.now, rtt[1:],
                                          targets=others, hours_of_day=only))
    out: dict[str, dict[str, Entry]] = defaultdict(dict)
    for (target, probe), entry in got.items():
        out[target][probe] = entry
    return out


async def compute(store: Store, days: int = DEFAULT_DAYS, window: HourWindow | str = DEFAULT_WINDOW,
                  offpeak: HourWindow | str = DEFAULT_OFFPEAK, agent: str | None = None,
                  region: str | None = None, now: datetime | None = None,
                  peak_only: bool = False) -> PeakReport:
    """The whole report: rows ranked within each region, ordered by region, rank, agent, target.
    Reads the prefix rollups: a few rows per series whatever `days` is (netprobe.store.prefix).
    `peak_only` (the budget): the peak window alone, without off-peak figures, profiles and
    detected lines, so only the window's hours are read."""
    win, off = window_of(window, "--window"), window_of(offpeak, "--offpeak")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    now = now if now is not None else utc_now()
    agents, target_info = await fleet.load_agents(store), await fleet.load_targets(store)
    chosen = [info for info in sorted(agents.values(), key=lambda a: a.id)
              if (agent is None or info.id == agent) and (region is None or info.region == region)]
    # Agents are read ahead (store.parallel_reads at a time), so the database answers the next one's
    # queries while this process works on the rows it has; each agent's detected lines are read
    # alongside. Only the agents in flight are held in memory.
    async def read(info: fleet.AgentInfo) -> tuple[ZoneInfo, str | None, dict[str, dict[str, Entry]]]:
        zone, problem = zone_of(info.timezone)
        return zone, problem, await _agent_series(store, info.id, last_days(zone, days, now), target_info,
                                                  (win,) if peak_only else (win, off), profile=not peak_only)

    queue = iter(chosen)
    ahead: deque[tuple[fleet.AgentInfo, asyncio.Future[Any]]] = deque()

    def launch() -> None:
        info = next(queue, None)
        if info is not None:
            ahead.append((info, asyncio.ensure_future(read(info))))

    line_reads: list[asyncio.Future[dict[tuple[str, str], fleet.DetectedLine]]] = []
    rows: list[PeakRow] = []
    warnings: list[str] = []
    try:
        for _ in range(store.parallel_reads):
            launch()
        while ahead:
            info, pending = ahead.popleft()
            launch()
            zone, problem, grouped = await pending
            if not peak_only:
                line_reads.append(asyncio.ensure_future(
                    fleet.detected_lines(store, [(info.id, t) for t in sorted(grouped)], now)))
            if grouped and problem:
                warnings.append(f"agent {info.id}: {problem}; its windows are taken in UTC")
            rows += [_row(info, zone, tid, target_info.get(tid), probes, win, None if peak_only else off)
                     for tid, probes in sorted(grouped.items())]
        lines = {k: v for found in await asyncio.gather(*line_reads) for k, v in found.items()}
    finally:
        tasks: list[asyncio.Future[Any]] = [*(t for _, t in ahead), *line_reads]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    rows = [replace(r, detected_line=lines[(r.agent, r.target)].label) if (r.agent, r.target) in lines else r
            for r in rows]
    return PeakReport(rows=rank_rows(rows), days=days, window=win, offpeak=off, generated_at=now,
                      agent=agent, region=region, warnings=warnings)


async def peak_rows(store: Store, days: int = DEFAULT_DAYS, window: HourWindow | str = DEFAULT_WINDOW,
                    offpeak: HourWindow | str = DEFAULT_OFFPEAK, agent: str | None = None,
                    region: str | None = None, now: datetime | None = None,
                    peak_only: bool = False) -> list[PeakRow]:
    """Peak vs off-peak per agent × target over the last `days` local days (see windows.py for the
    exact rules), ranked within each region. `window`/`offpeak`: HourWindow or "20-23"-style text.
    `peak_only`: as compute's."""
    report = await compute(store, days, window, offpeak, agent=agent, region=region, now=now,
                           peak_only=peak_only)
    return report.rows
