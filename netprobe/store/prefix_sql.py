"""The SQL of prefix rollups (netprobe.store.prefix): fold hourly rows in, invalidate on late writes, and
answer "these local days of this agent" per series from a few rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlalchemy import String, TextualSelect, bindparam, delete, func, select, text, tuple_

from netprobe.store.engine import AsyncConnection
from netprobe.store.prefix import (
    LEVELS,
    Extremes,
    Folder,
    ForeignSketch,
    PrefixRow,
    covers,
    decode_level,
    decode_sums,
    encode_level,
    encode_sums,
    fold_until,
    level_for,
    local_day,
    midnight,
)
from netprobe.store.rollups import hour_of
from netprobe.store.schema import agents, rollups_hourly, rollups_prefix, store_meta
from netprobe.times import zone_of

if TYPE_CHECKING:
    from netprobe.store.hour_arrays import HourArrays

_P = rollups_prefix.c
_H = rollups_hourly.c
_REFOLD = "prefix_refold_from"     # store_meta: a late write emptied some series before this instant
_FOLD_LOCK = 0x6E70_0002            # PostgreSQL advisory lock: a fold vs. late writers
Series = tuple[str, str, str]       # agent_id, target_id, probe
_LEVEL_COLS = [getattr(_P, f"l{k}") for k in range(LEVELS)]


def _day_of(fu: datetime, zone: ZoneInfo) -> date:
    return local_day(fu - timedelta(microseconds=1), zone)


def _row(r: Any, zone: ZoneInfo, sums: bool, levels: Iterable[int]) -> PrefixRow:
    return PrefixRow(folded_until=r.folded_until, day=_day_of(r.folded_until, zone),
                     sums=decode_sums(r.payload) if sums else None,
                     levels={k: decode_level(getattr(r, f"l{k}")) for k in levels})


def _partial(row: PrefixRow, zone: ZoneInfo) -> bool:
    return row.folded_until != midnight(row.day + timedelta(days=1), zone)


# -- writers -------------------------------------------------------------------------------------------
async def invalidate(conn: AsyncConnection, dialect: str, first_hours: Mapping[Series, datetime],
                     now: datetime) -> None:
    """A write into hours that a fold may already hold: drop those series' rows from that hour on
    (the next fold rebuilds them). Hours of the current hour onwards are never folded: no work."""
    late = {s: h for s, h in first_hours.items() if h < hour_of(now)}
    if not late:
        return
    if dialect == "postgresql":     # ordered with a running fold (it holds the lock exclusively)
        await conn.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": _FOLD_LOCK})
    oldest = min(late.values())
    newer = (await conn.execute(select(func.max(_P.folded_until)))).scalar()
    if newer is None or newer <= oldest:
        return
    stmt = delete(rollups_prefix).where(
        _P.agent_id == bindparam("a"), _P.target_id == bindparam("t"), _P.probe == bindparam("p"),
        _P.folded_until > bindparam("h", type_=_P.folded_until.type))
    await conn.execute(stmt, [{"a": a, "t": t, "p": p, "h": h} for (a, t, p), h in sorted(late.items())])
    marker = (await conn.execute(select(store_meta.c.value).where(store_meta.c.key == _REFOLD))).scalar()
    if marker is None or datetime.fromisoformat(marker) > oldest:
        await _set_meta(conn, dialect, _REFOLD, oldest.isoformat())


async def _set_meta(conn: AsyncConnection, dialect: str, key: str, value: str) -> None:
    if dialect == "postgresql":  # SQLAlchemy's PostgreSQL dialects only where they are used
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        ins: Any = pg_insert(store_meta)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        ins = sqlite_insert(store_meta)
    await conn.execute(ins.on_conflict_do_update(index_elements=["key"], set_={"value": ins.excluded.value}),
                       {"key": key, "value": value})


# -- the fold ------------------------------------------------------------------------------------------
@dataclass
class FoldStats:
    series: int = 0
    rows: int = 0
    skipped: list[str] = field(default_factory=list)
    unfolded_from: datetime | None = None       # first hour of a skipped series


async def fold_plan(conn: AsyncConnection) -> tuple[list[Series], str | None]:
    """The series with hours to fold (those with hours after their newest row, or without rows), and
    the refold marker as read (cleared by fold_done only if no late write moved it since)."""
    marker = (await conn.execute(select(store_meta.c.value).where(store_meta.c.key == _REFOLD))).scalar()
    newest = (await conn.execute(select(_P.agent_id, _P.target_id, _P.probe, func.max(_P.folded_until))
                                 .group_by(_P.agent_id, _P.target_id, _P.probe))).all()
    since = min((r[3] for r in newest), default=None)
    if since is not None and marker is not None:
        since = min(since, datetime.fromisoformat(marker))
    q = select(_H.agent_id, _H.target_id, _H.probe).group_by(_H.agent_id, _H.target_id, _H.probe)
    if since is not None:
        q = q.where(_H.hour >= since)
    series = {(r[0], r[1], r[2]) for r in await conn.execute(q)}
    return sorted(series), marker


async def clear(conn: AsyncConnection) -> None:
    await conn.execute(delete(rollups_prefix))


async def fold_done(conn: AsyncConnection, dialect: str, marker: str | None, stats: FoldStats) -> None:
    """Clear the refold marker as read at the start, unless a late write moved it since; series the
    fold could not take keep one at their first hour, so readers go on reading their hours."""
    if stats.unfolded_from is not None:
        await _set_meta(conn, dialect, _REFOLD, stats.unfolded_from.isoformat())
    elif marker is not None:
        await conn.execute(delete(store_meta).where(store_meta.c.key == _REFOLD,
                                                    store_meta.c.value == marker))


async def fold(conn: AsyncConnection, dialect: str, series: Sequence[Series], now: datetime,
               stats: FoldStats) -> None:
    """Fold every hour of these series that ended FOLD_LAG ago into their prefix rows."""
    if dialect == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _FOLD_LOCK})
    else:   # take SQLite's write lock first, so what we read is what we build on
        await _set_meta(conn, dialect, "prefix_fold_at", now.isoformat())
    until = fold_until(now)
    ids = sorted({s[0] for s in series})
    zones = {r.id: zone_of(r.timezone)[0]
             for r in await conn.execute(select(agents.c.id, agents.c.timezone).where(agents.c.id.in_(ids)))}
    for s in series:
        zone = zones.get(s[0])
        if zone is not None:
            await _fold_series(conn, s, zone, until, stats)


async def _fold_series(conn: AsyncConnection, series: Series, zone: ZoneInfo, until: datetime,
                       stats: FoldStats) -> None:
    agent_id, target_id, probe = series
    mine = (_P.agent_id == agent_id, _P.target_id == target_id, _P.probe == probe)
    newest = select(rollups_prefix).where(*mine).order_by(_P.folded_until.desc()).limit(1)
    r = (await conn.execute(newest)).first()
    start: PrefixRow | None = None
    if r is not None and r.zone != str(zone.key):   # the agent moved zone: rebuild from the start
        await conn.execute(delete(rollups_prefix).where(*mine))
    elif r is not None:
        start = _row(r, zone, True, (0,))
    q = select(rollups_hourly).where(_H.agent_id == agent_id, _H.target_id == target_id, _H.probe == probe,
                                     _H.hour < until)
    if start is not None:
        q = q.where(_H.hour >= start.folded_until)
    hours = (await conn.execute(q.order_by(_H.hour))).mappings().all()
    if not hours:
        return
    if start is None:
        first_day = local_day(hours[0]["hour"], zone)
    else:
        first_day = start.day if _partial(start, zone) else start.day + timedelta(days=1)
    last_day = local_day(hours[-1]["hour"], zone)
    span = _days(first_day, last_day)
    wanted = sorted({d - timedelta(days=1 << j) for d in span for j in range(LEVELS - 1)} - set(span))
    history: dict[date, list[dict[int, Extremes]]] = {}
    if start is not None and wanted:
        fus = [midnight(d + timedelta(days=1), zone) for d in wanted]
        for i in range(0, len(fus), 500):
            rows = await conn.execute(select(_P.folded_until, *_LEVEL_COLS).where(
                *mine, _P.folded_until.in_(fus[i:i + 500])))
            for lv in rows:
                history[_day_of(lv.folded_until, zone)] = [decode_level(getattr(lv, f"l{k}"))
                                                          for k in range(LEVELS)]
    folder = Folder(zone, start, history)
    try:
        for h in hours:
            folder.add(h)
    except ForeignSketch:
        stats.skipped.append("/".join(series))
        first = hours[0]["hour"] if start is None else start.folded_until
        stats.unfolded_from = first if stats.unfolded_from is None else min(stats.unfolded_from, first)
        return
    folder.finish(until)
    if start is not None and _partial(start, zone):
        await conn.execute(delete(rollups_prefix).where(*mine, _P.folded_until == start.folded_until))
    stamp = datetime.now(UTC)
    rows_out = [{"agent_id": agent_id, "target_id": target_id, "probe": probe, "folded_until": fu,
                 "zone": str(zone.key), "hours": sum(s.hours for s in sums.values()),
                 "payload": encode_sums(sums), "updated_at": stamp,
                 **{f"l{k}": encode_level(levels[k]) for k in range(LEVELS)}}
                for fu, _day, sums, levels in folder.out]
    for i in range(0, len(rows_out), 200):
        await conn.execute(rollups_prefix.insert(), rows_out[i:i + 200])
    stats.series += 1
    stats.rows += len(rows_out)


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


# -- the question the report asks ----------------------------------------------------------------------
Days = dict[str, "HourArrays"]       # per probe: the agent's series of it


def _marks(probes: Sequence[str], targets: Sequence[str] | None) -> TextualSelect:
    """Per series of one agent: its newest row by `now`, its newest by `start`, its first. Index
    descents per series (the agent's targets found by skipping along the primary key), so the cost
    follows the series, not the days they have stored."""
    kinds = " UNION ALL ".join(f"SELECT :p{i} AS probe" for i in range(len(probes)))
    one = ("(SELECT {f}(r.folded_until) FROM rollups_prefix r WHERE r.agent_id = :a AND r.target_id = t.id"
           " AND r.probe = k.probe{cond})")
    sql = f"""
        WITH RECURSIVE t(id) AS (
            SELECT (SELECT min(target_id) FROM rollups_prefix WHERE agent_id = :a)
            UNION ALL
            SELECT (SELECT min(target_id) FROM rollups_prefix WHERE agent_id = :a AND target_id > t.id)
            FROM t WHERE t.id IS NOT NULL)
        SELECT * FROM (
            SELECT t.id AS target_id, k.probe AS probe,
                   {one.format(f="max", cond=" AND r.folded_until <= :now")} AS last,
                   {one.format(f="max", cond=" AND r.folded_until <= :start")} AS before,
                   {one.format(f="min", cond="")} AS first
            FROM t, ({kinds}) k
            WHERE t.id IS NOT NULL{" AND t.id IN :targets" if targets is not None else ""}) m
        WHERE m.first IS NOT NULL"""
    fu = _P.folded_until.type
    binds = [bindparam("now", type_=fu), bindparam("start", type_=fu),
             *(bindparam(f"p{i}", value=probe) for i, probe in enumerate(probes))]
    if targets is not None:
        binds.append(bindparam("targets", value=list(targets), expanding=True))
    return text(sql).bindparams(*binds).columns(target_id=String(), probe=String(), last=fu, before=fu,
                                                first=fu)


async def local_days(conn: AsyncConnection, agent_id: str, zone: ZoneInfo, first: date, now: datetime,
                     probes: Sequence[str], targets: Sequence[str] | None = None,
                     hours_of_day: Mapping[str, Sequence[int]] | None = None
                     ) -> Days:
    """Per (target, probe) of this agent: sums and extremes per local hour of day over the hours whose
    local date is ≥ `first` and that started before `now` (so: the last N local days, today included).
    `hours_of_day`: per probe, the only hours of day wanted (None: all 24)."""
    from netprobe.store import hour_arrays as arrays  # NumPy: readers only, never an agent's writes

    start = midnight(first, zone)
    # No zone here: the marks come from the primary key alone; the rows read below are checked for it.
    lasts: dict[tuple[str, str], datetime] = {}
    befores: dict[tuple[str, str], datetime] = {}
    firsts: dict[tuple[str, str], datetime] = {}
    for r in await conn.execute(_marks(probes, targets), {"a": agent_id, "now": now, "start": start}):
        key = (r.target_id, r.probe)
        firsts[key] = r.first
        if r.last is not None:
            lasts[key] = r.last
        if r.before is not None:
            befores[key] = r.before

    # Which rows to read, per series: L (sums + extremes at its day), B (sums before the first day),
    # R (extremes of the 2^k days starting at the first day).
    plan: dict[tuple[str, str], dict[str, Any]] = {}
    for key, fu_last in lasts.items():
        if fu_last <= start:
            continue                  # folded only up to before these days: all from hourly rows
        d_last = _day_of(fu_last, zone)
        d_first = first
        fu_before = befores.get(key)
        if fu_before is None:         # no data before the first day: start at the series' first day
            d_first = max(first, _day_of(firsts[key], zone))
        n = (d_last - d_first).days + 1
        if n < 1 or not covers(n):
            continue
        k = level_for(n)
        fu_r = midnight(d_first + timedelta(days=(1 << k)), zone)
        plan[key] = {"L": fu_last, "B": fu_before, "R": fu_r if fu_r < fu_last else fu_last, "k": k}
    wanted: dict[tuple[str, str, datetime], set[str]] = defaultdict(set)
    for key, p in plan.items():
        wanted[(*key, p["L"])].add("sums")
        wanted[(*key, p["L"])].add(f"l{p['k']}")
        if p["B"] is not None:
            wanted[(*key, p["B"])].add("sums")
        wanted[(*key, p["R"])].add(f"l{p['k']}")
    fetched: dict[tuple[str, str, datetime], dict[str, Any]] = {}
    by_columns: dict[tuple[str, ...], list[tuple[str, str, datetime]]] = defaultdict(list)
    for key_fu, needs in wanted.items():
        by_columns[tuple(sorted(needs))].append(key_fu)
    for names, keys in by_columns.items():       # only the columns each row is read for
        cols = [_P.payload if n == "sums" else getattr(_P, n) for n in names]
        base = select(_P.target_id, _P.probe, _P.folded_until, _P.zone, *cols).where(_P.agent_id == agent_id)
        instants = sorted({k[2] for k in keys})
        if len(instants) <= 8:      # the usual case: every series folded by the same runs, at midnights
            wanted_keys = set(keys)
            queries = [base.where(_P.probe.in_(probes), _P.folded_until.in_(instants))]
        else:
            wanted_keys = None
            queries = [base.where(tuple_(_P.target_id, _P.probe, _P.folded_until).in_(keys[i:i + 500]))
                       for i in range(0, len(keys), 500)]
        for q in queries:
            for r in await conn.execute(q):
                if wanted_keys is not None and (r[0], r[1], r[2]) not in wanted_keys:
                    continue
                if r[3] == str(zone.key):      # rows of another zone: the fold has yet to redo them
                    fetched[(r[0], r[1], r[2])] = dict(zip(names, r[4:], strict=True))

    builders = {p: arrays.Builder() for p in probes}
    tails: dict[tuple[str, str], datetime] = {}
    missing = False
    for key, p in plan.items():
        lrow, rrow = fetched.get((*key, p["L"])), fetched.get((*key, p["R"]))
        brow = fetched.get((*key, p["B"])) if p["B"] is not None else None
        if lrow is None or rrow is None or (p["B"] is not None and brow is None):
            missing = True            # a fold or a late write in between: read the hours instead
            continue
        b = builders[key[1]]
        b.add_part(key[0], arrays.decode(lrow["sums"]), 1.0)
        if brow is not None:
            b.add_part(key[0], arrays.decode(brow["sums"]), -1.0)
        level = f"l{p['k']}"
        b.add_extremes(key[0], arrays.decode_extremes(lrow[level]))
        b.add_extremes(key[0], arrays.decode_extremes(rrow[level]))
        tails[key] = p["L"]
    # Hours after each series' newest row (its tail), and every hour of series without usable rows:
    # of the whole days if nothing of this agent is folded, else only since the fold (new series) or
    # since a late write emptied some (the refold marker). No list of series goes into the SQL: the
    # tails start at one instant in the usual case, and series without rows are rare.
    since = start
    marker: str | None = None
    if lasts and not missing:
        since = max(start, min(lasts.values()) - timedelta(days=1))
        marker = (await conn.execute(select(store_meta.c.value).where(store_meta.c.key == _REFOLD))).scalar()
        if marker is not None:
            since = max(start, min(since, datetime.fromisoformat(marker) - timedelta(days=1)))
    hq = select(rollups_hourly).where(_H.agent_id == agent_id, _H.probe.in_(probes), _H.hour < now)
    if targets is not None:
        hq = hq.where(_H.target_id.in_(targets))
    t0 = min(tails.values(), default=since)       # the rows filter below keeps each series' own hours
    queries = [hq.where(_H.hour >= t0)]
    # Series without usable rows, with hours before the tails start: only where rows went missing
    # (read from the first day) or a late write or a skipped series left the refold marker. Otherwise
    # every series with hours before the last fold has rows up to it (the fold takes every series
    # with hours after its newest row), so a series without rows has hours only in the tail query's.
    if since < t0 and (missing or marker is not None):
        gap = (_H.hour >= since, _H.hour < t0)
        seen = select(_H.target_id, _H.probe).where(hq.whereclause, *gap).distinct()  # type: ignore[arg-type]
        new = sorted({(r[0], r[1]) for r in await conn.execute(seen)} - set(tails))
        if new:
            queries.append(hq.where(*gap, _H.target_id.in_(sorted({t for t, _ in new}))))
    for q in queries:
        for m in (await conn.execute(q)).mappings():
            hour = m["hour"]
            key = (m["target_id"], m["probe"])
            tail = tails.get(key)
            if (hour < tail if tail is not None else hour < since) or local_day(hour, zone) < first:
                continue
            h = hour.astimezone(zone).hour
            only = (hours_of_day or {}).get(key[1])
            if only is not None and h not in only:
                continue
            builders[key[1]].add_hour(key[0], h, dict(m))
    out: Days = {}
    for probe, b in builders.items():
        got = b.build((hours_of_day or {}).get(probe))
        if got.targets:
            out[probe] = got
    return out


__all__ = ["Days", "FoldStats", "clear", "fold", "fold_done", "fold_plan", "invalidate", "local_days"]
