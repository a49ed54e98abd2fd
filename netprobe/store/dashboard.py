"""What the dashboard reads beyond the report's queries (docs/dashboard.md) — agents' health, firing alerts —
and the one write behind it: an agent's health as its uplink reports it on each upload (the collector's
ingest, never a page)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import update

from netprobe.store.fleet import AgentInfo
from netprobe.store.reads import Source, utc
from netprobe.store.schema import agents
from netprobe.store.store import Store

_A = agents.c


@dataclass(frozen=True, slots=True)
class AgentHealth(AgentInfo):
    first_seen: datetime | None       # None: a token was issued, nothing was received yet
    last_seen: datetime | None
    outbox_backlog: int | None        # None: its uplink does not report it (yet)
    clock_offset_ms: float | None     # its clock minus the collector's, ± the upload's one-way time
    health_at: datetime | None
    token: str                        # live | revoked | none


async def note_health(store: Store, agent_id: str, backlog: int | None, offset_ms: float | None,
                      at: datetime) -> None:
    """Record what an upload's headers said (the agent's row exists once its first round is stored)."""
    async with store._write("recording an agent's health in") as conn:
        await conn.execute(update(agents).where(_A.id == agent_id)
                           .values(outbox_backlog=backlog, clock_offset_ms=offset_ms, health_at=at))


_AGENTS = (
    "SELECT a.id, a.region, a.isp, a.timezone, a.first_seen, a.last_seen, a.outbox_backlog,"
    " a.clock_offset_ms, a.health_at, t.revoked_at, t.agent_id FROM agents a"
    " LEFT JOIN agent_tokens t ON t.agent_id = a.id"
    " UNION ALL SELECT t.agent_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, t.revoked_at, t.agent_id"
    " FROM agent_tokens t WHERE NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = t.agent_id)")


async def agents_health(store: Source) -> list[AgentHealth]:
    """Every agent that sent rounds or holds a token, by id."""
    async with store.reading("reading agents from") as conn:
        rows = await conn.fetch(_AGENTS)
    out = []
    for (agent_id, region, isp, zone, first, last, backlog, offset, at, revoked, has_token) in rows:
        out.append(AgentHealth(
            id=agent_id, region=region, isp=isp, timezone=zone,
            first_seen=utc(first) if first is not None else None,
            last_seen=utc(last) if last is not None else None,
            outbox_backlog=int(backlog) if backlog is not None else None,
            clock_offset_ms=float(offset) if offset is not None else None,
            health_at=utc(at) if at is not None else None,
            token="none" if has_token is None else "revoked" if revoked is not None else "live"))
    return sorted(out, key=lambda h: h.id)


async def firing_alerts(store: Source) -> dict[tuple[str, str], list[str]]:
    """The alerts open now per agent × target, from the alert history (netprobe.store.alert_events):
    each rule × pair's newest event unless it resolved. A quorum rule's route alert is listed on every
    agreeing pair as "rule (route, N agents)", a last-mile one as "rule (local)"."""
    sql = ("SELECT e.agent_id, e.target_id, e.rule, e.local, e.quorum, e.agents FROM alert_events e"
           " WHERE e.state <> 'resolved' AND NOT EXISTS (SELECT 1 FROM alert_events l"
           " WHERE l.rule = e.rule AND l.agent_id = e.agent_id AND l.target_id = e.target_id"
           " AND l.local = e.local AND l.id > e.id) ORDER BY e.rule")
    async with store.reading("reading alerts from") as conn:
        rows = await conn.fetch(sql)
    out: dict[tuple[str, str], list[str]] = {}
    for agent_id, target_id, rule, local, quorum, agreed in rows:
        if local:
            label = f"{rule} (local)"
        elif quorum is not None:
            n = len(agreed if isinstance(agreed, list) else json.loads(agreed or "[]"))
            label = f"{rule} (route, {n} agents)"
        else:
            label = rule
        out.setdefault((agent_id, target_id), []).append(label)
    return out
