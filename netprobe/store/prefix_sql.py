"""The SQL of prefix rollups (netprobe.store.prefix): fold hourly rows in, invalidate on late writes
(the readers' question, "these local days of this agent", is netprobe.store.prefix_read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import bindparam, delete, func, select, text

from netprobe.store.engine import AsyncConnection, upsert
from netprobe.store.prefix import (
    LEVELS,
    Extremes,
    Folder,
    PrefixRow,
    day_folded,
    decode_level,
    decode_sums,
    encode_level,
    encode_sums,
    fold_until,
    local_day,
    midnight,
)
from netprobe.store.prefix_read import REFOLD
from netprobe.store.rollups import hour_of
from netprobe.store.schema import agents, rollups_hourly, rollups_prefix, store_meta
from netprobe.store.sketch import ForeignSketch
from netprobe.times import zone_of

_P = rollups_prefix.c
_H = rollups_hourly.c
_FOLD_LOCK = 0x6E70_0002            # PostgreSQL advisory lock: a fold vs. late writers
Series = tuple[str, str, str]       # agent_id, target_id, probe
_LEVEL_COLS = [getattr(_P, f"l{k}") for k in range(LEVELS)]


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
    marker = (await conn.execute(select(store_meta.c.value).where(store_meta.c.key == REFOLD))).scalar()
    if marker is None or datetime.fromisoformat(marker) > oldest:
        await set_meta(conn, dialect, REFOLD, oldest.isoformat())


async def set_meta(conn: AsyncConnection, dialect: str, key: str, value: str) -> None:
    """Set store_meta's `key` to `value`."""
    ins = upsert(dialect, store_meta)
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
    marker = (await conn.execute(select(store_meta.c.value).where(store_meta.c.key == REFOLD))).scalar()
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
        await set_meta(conn, dialect, REFOLD, stats.unfolded_from.isoformat())
    elif marker is not None:
        await conn.execute(delete(store_meta).where(store_meta.c.key == REFOLD,
                                                    store_meta.c.value == marker))


async def fold(conn: AsyncConnection, dialect: str, series: Sequence[Series], now: datetime,
               stats: FoldStats) -> None:
    """Fold every hour of these series that ended FOLD_LAG ago into their prefix rows."""
    if dialect == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _FOLD_LOCK})
    else:   # take SQLite's write lock first, so what we read is what we build on
        await set_meta(conn, dialect, "prefix_fold_at", now.isoformat())
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
        start = PrefixRow(folded_until=r.folded_until, day=day_folded(r.folded_until, zone),
                          sums=decode_sums(r.payload), levels={0: decode_level(r.l0)})
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
        first_day = start.day if start.partial(zone) else start.day + timedelta(days=1)
    last_day = local_day(hours[-1]["hour"], zone)
    span = [first_day + timedelta(days=i) for i in range((last_day - first_day).days + 1)]
    wanted = sorted({d - timedelta(days=1 << j) for d in span for j in range(LEVELS - 1)} - set(span))
    history: dict[date, list[dict[int, Extremes]]] = {}
    if start is not None and wanted:
        fus = [midnight(d + timedelta(days=1), zone) for d in wanted]
        for i in range(0, len(fus), 500):
            rows = await conn.execute(select(_P.folded_until, *_LEVEL_COLS).where(
                *mine, _P.folded_until.in_(fus[i:i + 500])))
            for lv in rows:
                history[day_folded(lv.folded_until, zone)] = [decode_level(getattr(lv, f"l{k}"))
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
    if start is not None and start.partial(zone):
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


__all__ = ["FoldStats", "clear", "fold", "fold_done", "fold_plan", "invalidate"]
