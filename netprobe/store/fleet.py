"""Who measures what, over which line: the agents and targets on record and each pair's detected line
(what the reports and diagnose ask beyond Store.hourly)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, cast, func, literal, select
from sqlalchemy.dialects.postgresql import JSONB

from netprobe.store.engine import AsyncConnection
from netprobe.store.events import route_of, route_probes
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
    seen_at: datetime         # the traced round (or route event) it comes from
    source: str               # the latest stored round's probe (mtr, rmtr), or "event" (latest route event)


async def load_agents(store: Store) -> dict[str, AgentInfo]:
    a = agents.c
    async with store._read("reading agents from") as conn:
        rows = (await conn.execute(select(a.id, a.region, a.isp, a.timezone))).all()
    return {r.id: AgentInfo(r.id, r.region, r.isp, r.timezone) for r in rows}


async def load_targets(store: Store) -> dict[str, TargetInfo]:
    t = targets.c
    async with store._read("reading targets from") as conn:
        rows = (await conn.execute(select(t.id, t.host, t.datacenter, t.line))).all()
    return {r.id: TargetInfo(r.id, r.host, r.datacenter or None, r.line or None) for r in rows}


@dataclass(frozen=True, slots=True)
class TargetOptions:
    id: str
    host: str | None
    options: Mapping[str, Any]   # the target as its agent last sent it (JSON), probe options included


async def load_target_options(store: Store) -> list[TargetOptions]:
    t = targets.c
    async with store._read("reading targets from") as conn:
        rows = (await conn.execute(select(t.id, t.host, t.info))).all()
    return [TargetOptions(r.id, r.host, r.info if isinstance(r.info, dict) else {}) for r in rows]


def _route_fields(c: Any, dialect: str) -> tuple[Any, ...]:
    # Only what decides the label: an mtr envelope's hubs are most of its size. `reached` as "is it
    # JSON false" (SQLite's json_extract reads false as 0, which route_of must not take for false).
    env = c.envelope
    if dialect == "postgresql":
        unreached = env[("result", "reached")] == cast(literal("false"), JSONB)
    else:
        unreached = func.json_type(env, "$.result.reached") == "false"
    return (env[("result", "status")], unreached, env[("result", "route")], env[("target", "line")])


def _label(row: Any, probe: str) -> str | None:
    """route_of's verdict on the fields read by _route_fields (of a round of `probe`)."""
    status, unreached, route, line = row[-4:]
    envelope = {"probe": probe, "target": {"line": line},
                "result": {"status": status, "reached": False if unreached else None, "route": route}}
    found = route_of(row.id, row.started_at, envelope)
    return found.label if found is not None else None


async def _newest_routes(conn: AsyncConnection, dialect: str, pairs: Sequence[tuple[str, str]], now: datetime,
                         probes: tuple[str, ...]) -> dict[tuple[str, str], tuple[str, datetime, str]]:
    """Of each pair's newest _LATEST_MTR rounds of `probes` (one direction's route probes) before `now`,
    the newest with a route label, its time and probe. Each pair costs index lookups (its newest round,
    by a correlated subquery per agent), not a scan of its raw rounds: the newest usually has a label;
    the few pairs whose newest has none look deeper."""
    c, t = probe_results.c, targets.c
    out: dict[tuple[str, str], tuple[str, datetime, str]] = {}
    by_agent: dict[str, list[str]] = defaultdict(list)
    for agent_id, target_id in pairs:
        by_agent[agent_id].append(target_id)

    def newest(agent_id: str, target_id: Any, depth: int) -> Select[Any]:
        return (select(c.id).where(c.agent_id == agent_id, c.target_id == target_id,
                                   c.probe.in_(probes),
                                   c.status != "error", c.started_at < now)
                .order_by(c.started_at.desc(), c.id.desc()).limit(depth))

    ids: list[str] = []
    for agent_id, target_ids in sorted(by_agent.items()):
        for i in range(0, len(target_ids), 500):
            q = select(newest(agent_id, t.id, 1).scalar_subquery()).where(t.id.in_(target_ids[i:i + 500]))
            ids += [r[0] for r in await conn.execute(q) if r[0] is not None]
    unlabelled = set(pairs)
    for i in range(0, len(ids), 500):
        q = (select(c.agent_id, c.target_id, c.id, c.probe, c.started_at, *_route_fields(c, dialect))
             .where(c.id.in_(ids[i:i + 500])))
        for row in await conn.execute(q):
            label = _label(row, row.probe)
            if label is not None:
                out[(row.agent_id, row.target_id)] = (label, row.started_at, row.probe)
                unlabelled.discard((row.agent_id, row.target_id))
    for agent_id, target_id in sorted(unlabelled):
        recent = newest(agent_id, target_id, _LATEST_MTR).subquery()
        q = (select(c.agent_id, c.target_id, c.id, c.probe, c.started_at, *_route_fields(c, dialect))
             .where(c.id.in_(select(recent.c.id))).order_by(c.started_at.desc(), c.id.desc()))
        for row in await conn.execute(q):
            label = _label(row, row.probe)
            if label is not None:
                out[(agent_id, target_id)] = (label, row.started_at, row.probe)
                break
    return out


async def detected_lines(store: Store, pairs: Iterable[tuple[str, str]], now: datetime,
                         direction: str = "forward") -> dict[tuple[str, str], DetectedLine]:
    """The latest route label of one direction per agent × target before `now` (forward: mtr's; return:
    rmtr's): from the newest stored round of that direction with a label, or, when retention has
    deleted the rounds, from the newest route event of that direction."""
    wanted = set(pairs)
    out: dict[tuple[str, str], DetectedLine] = {}
    probes = route_probes(direction)
    if not wanted or not probes:
        return out
    p = path_changes.c
    mine = p.agent_id.in_(sorted({a for a, _ in wanted})) & (p.direction == direction)
    newest = (select(p.agent_id, p.target_id, func.max(p.detected_at).label("at"))
              .where(mine, p.label.is_not(None), p.detected_at < now)
              .group_by(p.agent_id, p.target_id).subquery())
    events_q = (select(p.agent_id, p.target_id, p.detected_at, p.label)
                .join(newest, (p.agent_id == newest.c.agent_id) & (p.target_id == newest.c.target_id)
                      & (p.detected_at == newest.c.at))
                .order_by(p.id))
    async with store._read("reading routes from") as conn:
        for row in (await conn.execute(events_q)).all():
            key = (row.agent_id, row.target_id)
            if key in wanted:   # several events at one instant: the last inserted wins
                out[key] = DetectedLine(row.label, row.detected_at, "event")
        routes = await _newest_routes(conn, store.dialect, sorted(wanted), now, probes)
        for key, (label, started_at, probe) in routes.items():
            seen = out.get(key)
            if seen is None or started_at >= seen.seen_at:
                out[key] = DetectedLine(label, started_at, probe)
    return out
