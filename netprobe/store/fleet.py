"""Who measures what, over which line: the agents and targets on record and each pair's detected line
(what the reports and diagnose ask beyond Store.hourly). Plain SQL (netprobe.store.reads), so that a
report reads them without importing SQLAlchemy."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from netprobe.store.reads import Conn, Row, Source, utc
from netprobe.store.routes import route_of, route_probes

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


async def load_agents(store: Source) -> dict[str, AgentInfo]:
    async with store.reading("reading agents from") as conn:
        rows = await conn.fetch("SELECT id, region, isp, timezone FROM agents")
    return {r[0]: AgentInfo(r[0], r[1], r[2], r[3]) for r in rows}


async def load_targets(store: Source) -> dict[str, TargetInfo]:
    async with store.reading("reading targets from") as conn:
        rows = await conn.fetch("SELECT id, host, datacenter, line FROM targets")
    return {r[0]: TargetInfo(r[0], r[1], r[2] or None, r[3] or None) for r in rows}


@dataclass(frozen=True, slots=True)
class TargetOptions:
    id: str
    host: str | None
    options: Mapping[str, Any]   # the target as its agent last sent it (JSON), probe options included


async def load_target_options(store: Source) -> list[TargetOptions]:
    async with store.reading("reading targets from") as conn:
        rows = await conn.fetch("SELECT id, host, info FROM targets")
    out = []
    for target_id, host, info in rows:
        if store.dialect == "sqlite" and isinstance(info, str):     # JSON text there, JSONB's value here
            info = json.loads(info)
        out.append(TargetOptions(target_id, host, info if isinstance(info, dict) else {}))
    return out


def _route_rows(dialect: str, where: str) -> str:
    """agent_id, target_id, probe, id, started_at and only what decides the label of the rounds `where`
    (an mtr envelope's hubs are most of its size): as JSON values (status, route, line) and `reached`
    as "is it JSON false" (SQLite's json_extract reads false as 0, which route_of must not take for
    false)."""
    keys = "agent_id, target_id, probe, id, started_at"
    if dialect == "postgresql":
        # Each `#>` on the stored envelope detoasts and decompresses it anew: made a value once (`||`,
        # kept so by OFFSET 0), it is read four times in memory: the server decompresses a fleet's
        # 1,000 newest mtr rounds once instead of four times.
        return (f"SELECT {keys}, e #> '{{result,status}}', (e #> '{{result,reached}}') = 'false'::jsonb,"
                f" e #> '{{result,route}}', e #> '{{target,line}}'"
                f" FROM (SELECT {keys}, envelope || '{{}}'::jsonb AS e FROM probe_results WHERE {where}"
                " OFFSET 0) r")
    return (f"""SELECT {keys}, JSON_QUOTE(JSON_EXTRACT(envelope, '$."result"."status"')), """
            "json_type(envelope, '$.result.reached') = 'false', "
            """JSON_QUOTE(JSON_EXTRACT(envelope, '$."result"."route"')), """
            f"""JSON_QUOTE(JSON_EXTRACT(envelope, '$."target"."line"')) FROM probe_results WHERE {where}""")


def _label(row: Row, dialect: str, probe: str) -> str | None:
    """route_of's verdict on the fields read by _route_rows (after id, started_at), of a round of
    `probe`."""
    status, unreached, route, line = row[-4:]
    if dialect == "sqlite":          # JSON text (JSON_QUOTE): SQL NULL reads as JSON null
        status, route, line = (json.loads(v) if v is not None else None for v in (status, route, line))
    envelope = {"probe": probe, "target": {"line": line},
                "result": {"status": status, "reached": False if unreached else None, "route": route}}
    found = route_of(row[-6], utc(row[-5]), envelope)
    return found.label if found is not None else None


_PAIRS_PER_READ = 1000
_NEWEST = ("SELECT c.id FROM probe_results c WHERE c.agent_id = {agent} AND c.target_id = {target}"
           " AND c.probe IN %(probes)s AND c.status <> 'error' AND c.started_at < %(now)s"
           " ORDER BY c.started_at DESC, c.id DESC LIMIT {depth}")


async def _newest_routes(conn: Conn, dialect: str, pairs: Sequence[tuple[str, str]], now: datetime,
                         route: tuple[str, ...]) -> dict[tuple[str, str], tuple[str, datetime, str]]:
    """Of each pair's newest _LATEST_MTR rounds of the probes `route` (one direction's route probes)
    before `now`, the newest with a route label, its time and probe. Each pair costs index lookups (its
    newest round, by a correlated subquery), not a scan of its raw rounds: the newest usually has a
    label; the few pairs whose newest has none look deeper. The pairs go in _PAIRS_PER_READ at a time
    (a fleet report's 1,000 in one statement, not one per agent)."""
    out: dict[tuple[str, str], tuple[str, datetime, str]] = {}
    probes = list(route)
    ids: list[str] = []
    # Pairs without any round of these probes need no deeper look (most pairs of a direction nobody traces)
    unlabelled = set(pairs)
    newest = _NEWEST.format(agent="v.column1", target="v.column2", depth=1)
    ordered = sorted(pairs)
    for i in range(0, len(ordered), _PAIRS_PER_READ):
        rows = await conn.fetch(f"SELECT v.column1, v.column2, ({newest}) FROM %(pairs)s v",
                                {"pairs": ordered[i:i + _PAIRS_PER_READ], "probes": probes, "now": now})
        ids += [r[2] for r in rows if r[2] is not None]
        unlabelled -= {(r[0], r[1]) for r in rows if r[2] is None}
    for i in range(0, len(ids), _PAIRS_PER_READ):
        rows = await conn.fetch(_route_rows(dialect, "id IN %(ids)s"), {"ids": ids[i:i + _PAIRS_PER_READ]})
        for row in rows:
            label = _label(row, dialect, row[2])
            if label is not None:
                out[(row[0], row[1])] = (label, utc(row[4]), row[2])
                unlabelled.discard((row[0], row[1]))
    for agent_id, target_id in sorted(unlabelled):
        recent = _NEWEST.format(agent="%(a)s", target="%(t)s", depth=_LATEST_MTR)
        newest_first = " ORDER BY started_at DESC, id DESC"
        rows = await conn.fetch(_route_rows(dialect, f"id IN ({recent})") + newest_first,
                                {"a": agent_id, "t": target_id, "probes": probes, "now": now})
        for row in rows:
            label = _label(row, dialect, row[2])
            if label is not None:
                out[(agent_id, target_id)] = (label, utc(row[4]), row[2])
                break
    return out


async def detected_lines(store: Source, pairs: Iterable[tuple[str, str]], now: datetime,
                         direction: str = "forward") -> dict[tuple[str, str], DetectedLine]:
    """The latest route label of one direction per agent × target before `now` (forward: mtr's; return:
    rmtr's): from the newest stored round of that direction with a label, or, when retention has
    deleted the rounds, from the newest route event of that direction."""
    wanted = set(pairs)
    out: dict[tuple[str, str], DetectedLine] = {}
    probes = route_probes(direction)
    if not wanted or not probes:
        return out
    events_sql = (
        "SELECT p.agent_id, p.target_id, p.detected_at, p.label FROM path_changes p JOIN ("
        " SELECT agent_id, target_id, max(detected_at) AS at FROM path_changes"
        " WHERE agent_id IN %(agents)s AND direction = %(direction)s AND label IS NOT NULL"
        " AND detected_at < %(now)s GROUP BY agent_id, target_id) n"
        " ON p.agent_id = n.agent_id AND p.target_id = n.target_id AND p.detected_at = n.at"
        " WHERE p.direction = %(direction)s ORDER BY p.id")
    async with store.reading("reading routes from") as conn:
        for agent_id, target_id, detected_at, label in await conn.fetch(
                events_sql, {"agents": sorted({a for a, _ in wanted}), "now": now, "direction": direction}):
            key = (agent_id, target_id)
            if key in wanted:   # several events at one instant: the last inserted wins
                out[key] = DetectedLine(label, utc(detected_at), "event")
        routes = await _newest_routes(conn, store.dialect, sorted(wanted), now, probes)
    for key, (label, started_at, probe) in routes.items():
        seen = out.get(key)
        if seen is None or started_at >= seen.seen_at:
            out[key] = DetectedLine(label, started_at, probe)
    return out


async def never_folded(store: Source, now: datetime, days: float = 2.0) -> bool:
    """True when the database holds hourly rollups older than `days` and no prefix rollup at all (upkeep,
    `db import`, `db upgrade` and `db rebuild-rollups` fold them): a report would read every hour
    instead, so the commands say what to run rather than being slow without a word."""
    sql = ("SELECT EXISTS (SELECT 1 FROM rollups_prefix),"
           " EXISTS (SELECT 1 FROM rollups_hourly WHERE hour < %(before)s)")
    async with store.reading("reading rollups from") as conn:
        [(folded, old)] = await conn.fetch(sql, {"before": now - timedelta(days=days)})
    return not folded and bool(old)


__all__ = ["AgentInfo", "DetectedLine", "TargetInfo", "TargetOptions", "detected_lines", "load_agents",
           "load_target_options", "load_targets", "never_folded"]
