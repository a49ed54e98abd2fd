"""Read-only queries the reports need beyond Store.hourly: agents, targets, the detected line."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
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


async def detected_lines(store: Store, pairs: Iterable[tuple[str, str]],
                         now: datetime) -> dict[tuple[str, str], DetectedLine]:
    """The latest mtr route label per agent × target before `now`: from the newest stored mtr round
    with a label, or, when retention has deleted the rounds, from the newest route event."""
    wanted = set(pairs)
    out: dict[tuple[str, str], DetectedLine] = {}
    if not wanted:
        return out
    p = path_changes.c
    c = probe_results.c
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
        for agent_id, target_id in sorted(wanted):
            q = (select(c.id, c.started_at, c.envelope)
                 .where(c.agent_id == agent_id, c.target_id == target_id, c.probe == MTR,
                        c.status != "error", c.started_at < now)
                 .order_by(c.started_at.desc()).limit(_LATEST_MTR))
            for result_id, started_at, envelope in (await conn.execute(q)).all():
                route = route_of(result_id, started_at, envelope)
                if route is None or route.label is None:
                    continue
                seen = out.get((agent_id, target_id))
                if seen is None or started_at >= seen.seen_at:
                    out[(agent_id, target_id)] = DetectedLine(route.label, started_at, MTR)
                break
    return out
