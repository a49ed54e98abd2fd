"""Read-only queries the reports need beyond Store.hourly: agents, targets, the detected line."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from netprobe.store.engine import READ_ONLY, mapped_errors
from netprobe.store.events import MTR, route_of
from netprobe.store.schema import agents, path_changes, probe_results, targets
from netprobe.store.store import Store

_LATEST_MTR = 16      # newest mtr rounds looked at for a usable route (most recent first)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    id: str
    region: str | None
    isp: str | None
    timezone: str | None


@dataclass(frozen=True, slots=True)
class TargetInfo:
    id: str
    host: str | None
    datacenter: str | None
    line: str | None          # declared: the line it was sold as


@dataclass(frozen=True, slots=True)
class DetectedLine:
    label: str
    seen_at: datetime         # the mtr round (or route event) it comes from
    source: str               # "mtr" (latest stored round) or "event" (latest route event)


@asynccontextmanager
async def _read(store: Store, doing: str) -> AsyncIterator[AsyncConnection]:
    # as Store._read: a read-only transaction, so SQLite does not take the write lock for it
    async with mapped_errors(store.url, doing), store.engine.connect() as conn:
        await conn.execution_options(**READ_ONLY)
        yield conn


async def load_agents(store: Store) -> dict[str, AgentInfo]:
    a = agents.c
    async with _read(store, "reading agents from") as conn:
        rows = (await conn.execute(select(a.id, a.region, a.isp, a.timezone))).all()
    return {r.id: AgentInfo(r.id, r.region, r.isp, r.timezone) for r in rows}


async def load_targets(store: Store) -> dict[str, TargetInfo]:
    t = targets.c
    async with _read(store, "reading targets from") as conn:
        rows = (await conn.execute(select(t.id, t.host, t.datacenter, t.line))).all()
    return {r.id: TargetInfo(r.id, r.host, r.datacenter or None, r.line or None) for r in rows}


async def _newest_routes(conn: AsyncConnection, pairs: Sequence[tuple[str, str]], now: datetime,
                         depth: int) -> dict[tuple[str, str], tuple[str, datetime]]:
    """Of each pair's newest `depth` mtr rounds before `now`, the newest with a route label."""
    c = probe_results.c
    out: dict[tuple[str, str], tuple[str, datetime]] = {}
    for i in range(0, len(pairs), 500):
        chunk = pairs[i:i + 500]
        rn = func.row_number().over(partition_by=(c.agent_id, c.target_id),
                                    order_by=c.started_at.desc()).label("rn")
        inner = (select(c.agent_id, c.target_id, c.id, c.started_at, c.envelope, rn)
                 .where(tuple_(c.agent_id, c.target_id).in_(chunk), c.probe == MTR, c.status != "error",
                        c.started_at < now).subquery())
        q = select(inner).where(inner.c.rn <= depth).order_by(inner.c.agent_id, inner.c.target_id, inner.c.rn)
        for row in (await conn.execute(q)).all():
            key = (row.agent_id, row.target_id)
            if key in out:
                continue
            route = route_of(row.id, row.started_at, row.envelope)
            if route is not None and route.label is not None:
                out[key] = (route.label, row.started_at)
    return out


async def detected_lines(store: Store, pairs: Iterable[tuple[str, str]],
                         now: datetime) -> dict[tuple[str, str], DetectedLine]:
    """The latest mtr route label per agent × target before `now`: from the newest stored mtr round
    with a label, or, when retention has deleted the rounds, from the newest route event."""
    wanted = set(pairs)
    out: dict[tuple[str, str], DetectedLine] = {}
    if not wanted:
        return out
    p = path_changes.c
    newest = (select(p.agent_id, p.target_id, func.max(p.detected_at).label("at"))
              .where(p.label.is_not(None), p.detected_at < now)
              .group_by(p.agent_id, p.target_id).subquery())
    events_q = (select(p.agent_id, p.target_id, p.detected_at, p.label)
                .join(newest, (p.agent_id == newest.c.agent_id) & (p.target_id == newest.c.target_id)
                      & (p.detected_at == newest.c.at))
                .order_by(p.id))
    async with _read(store, "reading routes from") as conn:
        for row in (await conn.execute(events_q)).all():
            key = (row.agent_id, row.target_id)
            if key in wanted:   # several events at one instant: the last inserted wins
                out[key] = DetectedLine(row.label, row.detected_at, "event")
        # The newest usable mtr round per pair: one query for the newest round of every pair, then
        # the newest _LATEST_MTR of the few pairs whose newest round had no label.
        pending = sorted(wanted)
        for depth in (1, _LATEST_MTR):
            if not pending:
                break
            found = await _newest_routes(conn, pending, now, depth)
            for key, (label, started_at) in found.items():
                seen = out.get(key)
                if seen is None or started_at >= seen.seen_at:
                    out[key] = DetectedLine(label, started_at, MTR)
            pending = [k for k in pending if k not in found] if depth == 1 else []
    return out
