"""The evening-peak report (docs/reports.md): per agent × target, peak vs off-peak figures in the agent's
own time zone, merged from the hourly rollups' sketches (never from raw rounds, so it outlives raw
retention)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np

from netprobe.stats import loss_pct
from netprobe.store import fleet
from netprobe.store.prefix import COUNTERS
from netprobe.store.prefix_read import local_days
from netprobe.store.reads import Source
from netprobe.store.rollups import rollup_figures
from netprobe.times import iso, utc_now

from .ranking import RULE, ranked
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
from .slo import SloFigures, SloRequest, measured_server, slo_figures

if TYPE_CHECKING:
    from netprobe.store.hour_arrays import HourArrays, Window

from .windows import DEFAULT_OFFPEAK, DEFAULT_WINDOW, HourWindow, LocalDays, last_days, window_of, zone_of

DEFAULT_DAYS = 7
SloByRow = dict[tuple[str, str], SloFigures]     # the SLO figures of the rows made so far, by (agent, target)


# repr=False: asyncio.run's clean-up formats its SIGINT handler, which holds the main task and so
# the repr of its result; a fleet's report in full, twice per run.
@dataclass(frozen=True, slots=True, repr=False)
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
    slo: SloRequest | None = None    # the SLO each row's attainment is for

    def to_dict(self) -> dict[str, Any]:
        return {"generated_at": iso(self.generated_at), "note": self.note, "days": self.days,
                "slo_ttft_ms": self.slo.model.ttft_ms if self.slo is not None else None,
                "window": self.window.label,
                "offpeak_window": self.offpeak.label, "agent": self.agent, "region": self.region,
                "ranking": RULE, "warnings": list(self.warnings), "rows": [r.to_dict() for r in self.rows]}


# -- computing ----------------------------------------------------------------------------------------
# Every series of one agent and probe at once (netprobe.store.hour_arrays): a window is one merge over
# its hours for all of them, a profile 24; the figures are Rollup.figures' on the merged hours.
_COUNTER = {name: i for i, name in enumerate(COUNTERS)}
_QS = (0.50, 0.95, 0.99)
_PROFILE_QS = (0.05, 0.50, 0.95)


def _ints(w: Window, name: str) -> list[int]:
    # np.rint rounds half to even as round() does: the same ints, without a round() per series-hour
    ints: list[int] = np.rint(w.c[:, _COUNTER[name]]).astype(np.int64).tolist()
    return ints


def _or_none(values: Any) -> list[float | None]:
    return [None if v != v else v for v in values]


def _figures(w: Window, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per series, Rollup.figures of the merged hours (its quantiles by the DDSketch rank rule): the
    keys the report reads, and of the probes' own figures those in `names` (all when None)."""
    n = len(w.hours)
    sent, received, rounds = _ints(w, "sent"), _ints(w, "received"), _ints(w, "rounds")
    samples, jitter_n = _ints(w, "rtt_count"), _ints(w, "jitter_count")
    jitter_sum = w.c[:, _COUNTER["jitter_sum"]].tolist()
    q = w.quantiles(_QS)
    p50, p95, p99 = (_or_none(q[:, j].tolist()) for j in range(3))
    derived: dict[str, list[float | None]] = {}
    for f in rollup_figures():
        if names is not None and f.name not in names:
            continue
        total = w.extras.get(f.extra)
        if f.per is None:
            derived[f.name] = [None] * n if total is None else \
                [t / round(k) if round(k) else None for t, k in total.tolist()]
            continue
        per = w.extras.get(f.per)
        if per is None:
            derived[f.name] = [None] * n
            continue
        totals = [0.0] * n if total is None else [t for t, _ in total.tolist()]
        derived[f.name] = [t / (p / f.per_scale) if round(k) and p > 0 else None
                           for t, (p, k) in zip(totals, per.tolist(), strict=True)]
    return [{"rounds": rounds[i], "samples": samples[i],
             "loss_pct": loss_pct(sent[i], received[i]) if sent[i] else None,
             "jitter_ms": jitter_sum[i] / jitter_n[i] if jitter_n[i] else None,
             "rtt_p50_ms": p50[i], "rtt_p95_ms": p95[i], "rtt_p99_ms": p99[i],
             **{k: v[i] for k, v in derived.items()}} for i in range(n)]


@dataclass(slots=True)
class _Merged:
    """One probe's window for every series of an agent: figures per series, and what a row keeps."""

    window: Window
    figures: list[dict[str, Any]]

    def merged(self, i: int) -> MergedHours | None:
        if not self.window.hours[i]:
            return None
        e = self.window.ext[i].tolist()
        extremes = None if all(v != v for v in e) else [None if v != v else v for v in e]
        return MergedHours(int(self.window.hours[i]), extremes, partial(self.window.sums, i))


def _at(m: _Merged | None, i: int | None) -> dict[str, Any] | None:
    """Series i's figures in `m`; None where it has no hour there."""
    return m.figures[i] if m is not None and i is not None and m.window.hours[i] else None


def _window_of(rtt: _Merged | None, i: int | None, others: Mapping[str, tuple[_Merged | None, int | None]],
               figures: Mapping[str, tuple[tuple[str, str], ...]]) -> WindowFigures:
    """`others`: per figure probe, its merged window and this target's series in it; `figures`:
    figure_probes()."""
    extra: dict[str, float | None] = {}
    for probe, pairs in figures.items():
        got = _at(*others.get(probe, (None, None)))
        extra.update((name, got[figure] if got else None) for name, figure in pairs)
    w = _at(rtt, i)
    if w is None:
        return WindowFigures(None, None, None, None, None, rounds=0, hours=0, samples=0, extra=extra)
    assert rtt is not None and i is not None
    return WindowFigures(w["rtt_p50_ms"], w["rtt_p95_ms"], w["rtt_p99_ms"], w["jitter_ms"], w["loss_pct"],
                         rounds=w["rounds"], hours=int(rtt.window.hours[i]), samples=w["samples"],
                         extra=extra, merged=rtt.merged(i))


def _worst_hour(m: MergedHours | None, zone: ZoneInfo) -> WorstHour | None:
    e = m.extremes if m else None
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


def _profiles(arrays: HourArrays) -> list[tuple[HourProfile, ...]]:
    """Every series' 24 local hours of day, each merged over the days (all series and hours at once)."""
    w = arrays.each_hour()
    q = w.quantiles(_PROFILE_QS)
    p5, p50, p95 = (_or_none(q[:, j].tolist()) for j in range(3))
    sent, received, rounds = _ints(w, "sent"), _ints(w, "received"), _ints(w, "rounds")
    hours = [HourProfile(k % 24, p5[k], p50[k], p95[k], loss_pct(sent[k], received[k]) if sent[k] else None,
                         rounds[k]) if there else HourProfile(k % 24, None, None, None, None, 0)
             for k, there in enumerate(w.hours.tolist())]
    return [tuple(hours[k:k + 24]) for k in range(0, len(hours), 24)]


def _agent_rows(agent: fleet.AgentInfo, zone: ZoneInfo, targets: Mapping[str, fleet.TargetInfo],
                by_probe: Mapping[str, HourArrays], window: HourWindow, offpeak: HourWindow | None,
                slo: SloRequest | None = None, pending: SloByRow | None = None, profiles: bool = True
                ) -> list[PeakRow]:
    """The rows of one agent: each probe's windows merged for all its series at once, and with an
    off-peak window and `profiles`, their 24-hour profiles. With `slo`, their SLO figures go to
    `pending`, and are added to the rows when every agent's are done."""
    rtt_order = [p for p in rtt_probes() if p in by_probe]
    figures = figure_probes()          # once per agent: the registry is walked for each call
    figured = {p: [name for _, name in pairs] for p, pairs in figures.items()}
    index = {p: {t: i for i, t in enumerate(a.targets)} for p, a in by_probe.items()}
    windows = (window,) if offpeak is None else (window, offpeak)
    merged: dict[tuple[str, int], _Merged] = {}
    for w_i, win in enumerate(windows):
        for p, a in by_probe.items():
            w = a.window(win.hours)
            merged[(p, w_i)] = _Merged(w, _figures(w, figured.get(p) if p not in rtt_order else None))
    profiled = offpeak is not None and profiles
    columns = {p: _profiles(by_probe[p]) for p in rtt_order} if profiled else {}
    rows = []
    for target in sorted({t for a in by_probe.values() for t in a.targets}):
        rtt_probe = next((p for p in rtt_order if target in index[p]), None)
        i = index[rtt_probe][target] if rtt_probe else None
        found = [_window_of(merged[(rtt_probe, w_i)] if rtt_probe else None, i,
                            {p: (merged.get((p, w_i)), index.get(p, {}).get(target)) for p in figures},
                            figures)
                 for w_i in range(len(windows))]
        peak, off = found[0], found[1] if offpeak is not None else _window_of(None, None, {}, figures)
        info = targets.get(target)
        rows.append(PeakRow(
            agent=agent.id, region=agent.region, timezone=str(zone.key), target=target,
            datacenter=info.datacenter if info else None, line=info.line if info else None,
            detected_line=None, rtt_probe=rtt_probe, peak=peak, offpeak=off,
            worst_hour=_worst_hour(peak.merged, zone), degradation=_degradation(peak, off),
            profile=columns[rtt_probe][i] if rtt_probe and i is not None and profiled else ()))
    if slo is not None and pending is not None:
        _slo_jobs(rows, slo, by_probe, merged, index, offpeak is not None, pending)
    return rows


def _slo_jobs(rows: list[PeakRow], slo: SloRequest, by_probe: Mapping[str, HourArrays],
              merged: Mapping[tuple[str, int], _Merged], index: Mapping[str, Mapping[str, int]],
              offpeak: bool, pending: SloByRow) -> None:
    """The rows' SLO figures, computed per RTT probe for every series of it (report/slo.py)."""
    for probe in sorted({r.rtt_probe for r in rows if r.rtt_probe is not None}):
        peak, off = merged.get((probe, 0)), merged.get((probe, 1)) if offpeak else None
        if peak is None:
            continue
        mine = [(k, index[probe][r.target]) for k, r in enumerate(rows) if r.rtt_probe == probe]
        got = slo_figures(slo, peak.window, off.window if off is not None else None,
                          by_probe[probe].each_hour() if slo.hours else None, [i for _, i in mine],
                          [measured_server(rows[k].peak.extra) for k, _ in mine])
        keys = {i: (rows[k].agent, rows[k].target) for k, i in mine}
        pending.update((keys[i], figures) for i, figures in got.items())


async def _read_days(store: Source, agent: str, local: LocalDays, probes: Sequence[str],
                     targets: Sequence[str] | None, only: Mapping[str, Sequence[int]]
                     ) -> dict[str, HourArrays]:
    async with store.reading("reading rollups from") as conn:
        return await local_days(conn, agent, local.zone, local.first, local.now, probes, targets, only)


async def _agent_series(store: Source, agent: str, local: LocalDays, known_targets: Iterable[str],
                        windows: Sequence[HourWindow], profile: bool) -> dict[str, HourArrays]:
    """Per probe, what the report reads of one agent's local days. The RTT probe by every hour of day
    for the profile, else only in the windows, as tcp and sse; mtr only where there is no icmp."""
    in_windows = sorted({h for w in windows for h in w.hours})
    rtt, figured = rtt_probes(), [p for p in figure_probes() if p not in rtt_probes()]
    only = dict.fromkeys(figured, in_windows) | ({} if profile else dict.fromkeys(rtt, in_windows))
    got = await _read_days(store, agent, local, (*rtt[:1], *figured), None, only)
    with_first = set(got[rtt[0]].targets) if rtt and rtt[0] in got else set()
    others = sorted(set(known_targets) - with_first)
    if others and rtt[1:]:
        got.update(await _read_days(store, agent, local, rtt[1:], others, only))
    return got


async def compute(store: Source, days: int = DEFAULT_DAYS, window: HourWindow | str = DEFAULT_WINDOW,
                  offpeak: HourWindow | str = DEFAULT_OFFPEAK, agent: str | None = None,
                  region: str | None = None, now: datetime | None = None,
                  peak_only: bool = False, slo: SloRequest | None = None,
                  agent_ids: Collection[str] | None = None, profiles: bool = True) -> PeakReport:
    """The whole report: rows ranked within each region, ordered by region, rank, agent, target.
    Reads the prefix rollups: a few rows per series whatever `days` is (netprobe.store.prefix).
    `peak_only` (the budget): the peak window alone, without off-peak figures, profiles and
    detected lines, so only the window's hours are read. `agent_ids`: only these agents (the
    dashboard: those of one time zone, whose last peak ends at one instant). `profiles`: False where
    nothing shows the rows' 24-hour profiles (the terminal table,
    Markdown): the RTT probe is then read only in the windows' hours, as the other probes are."""
    win, off = window_of(window, "--window"), window_of(offpeak, "--offpeak")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    now = now if now is not None else utc_now()
    agents, target_info = await fleet.load_agents(store), await fleet.load_targets(store)
    chosen = [info for info in sorted(agents.values(), key=lambda a: a.id)
              if (agent is None or info.id == agent) and (region is None or info.region == region)
              and (agent_ids is None or info.id in agent_ids)]
    # Agents are read ahead (store.parallel_reads at a time), so the database answers the next one's
    # queries while this process works on the rows it has. Only the agents in flight are held in memory.
    async def read(info: fleet.AgentInfo) -> tuple[ZoneInfo, str | None, dict[str, HourArrays]]:
        zone, problem = zone_of(info.timezone)
        return zone, problem, await _agent_series(store, info.id, last_days(zone, days, now), target_info,
                                                  (win,) if peak_only else (win, off),
                                                  profile=profiles and not peak_only)

    queue = iter(chosen)
    ahead: deque[tuple[fleet.AgentInfo, asyncio.Future[Any]]] = deque()

    def launch() -> None:
        info = next(queue, None)
        if info is not None:
            ahead.append((info, asyncio.ensure_future(read(info))))

    rows: list[PeakRow] = []
    warnings: list[str] = []
    lines: dict[tuple[str, str], fleet.DetectedLine] = {}
    back: dict[tuple[str, str], fleet.DetectedLine] = {}      # the way back
    figuring: SloByRow | None = {} if slo is not None else None
    try:
        for _ in range(store.parallel_reads):
            launch()
        while ahead:
            info, pending = ahead.popleft()
            launch()
            zone, problem, grouped = await pending
            if grouped and problem:
                warnings.append(f"agent {info.id}: {problem}; its windows are taken in UTC")
            rows += _agent_rows(info, zone, target_info, grouped, win, None if peak_only else off, slo,
                                figuring, profiles)
    finally:
        tasks = [t for _, t in ahead]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if not peak_only and rows:
        # every agent's pairs at once: a few statements per direction, not a few per agent
        pairs = sorted({(r.agent, r.target) for r in rows})
        lines, back = await asyncio.gather(fleet.detected_lines(store, pairs, now),
                                           fleet.detected_lines(store, pairs, now, "return"))
    figures = figuring if figuring is not None else {}
    # one copy of a row for its rank and all the rest (a fleet has 1,000 rows)
    rows = [_finished(r, score, rank, lines.get(key), back.get(key), figures.get(key))
            for r, score, rank in ranked(rows) for key in ((r.agent, r.target),)]
    return PeakReport(rows=rows, days=days, window=win, offpeak=off, generated_at=now,
                      agent=agent, region=region, warnings=warnings, slo=slo)


def _finished(row: PeakRow, score: float | None, rank: int | None, out: fleet.DetectedLine | None,
              back: fleet.DetectedLine | None, slo: SloFigures | None) -> PeakRow:
    """The row with its score and rank, its detected lines and its SLO figures."""
    return replace(row, score_ms=score, rank=rank,
                   detected_line=out.label if out is not None else row.detected_line,
                   return_line=back.label if back is not None else row.return_line,
                   slo=slo if slo is not None else row.slo)


async def peak_rows(store: Source, days: int = DEFAULT_DAYS, window: HourWindow | str = DEFAULT_WINDOW,
                    offpeak: HourWindow | str = DEFAULT_OFFPEAK, agent: str | None = None,
                    region: str | None = None, now: datetime | None = None,
                    peak_only: bool = False, slo: SloRequest | None = None) -> list[PeakRow]:
    """Peak vs off-peak per agent × target over the last `days` local days (see windows.py for the
    exact rules), ranked within each region. `window`/`offpeak`: HourWindow or "20-23"-style text.
    `peak_only`: as compute's."""
    report = await compute(store, days, window, offpeak, agent=agent, region=region, now=now,
                           peak_only=peak_only, slo=slo)
    return report.rows
