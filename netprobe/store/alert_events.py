"""The alert_events table: every alert transition, written with the rule's states (same transaction),
read back: one agent × target's history (the dashboard's target page), and what is firing now.

An alert is open while the newest event of its rule × agent × target × local is `firing` or `local`.
A quorum alert is one row per agreeing agent × target (each naming all the agents), so an agent's
history holds the route problems it took part in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import and_, exists, select

from netprobe.store.engine import AsyncConnection
from netprobe.store.schema import alert_events
from netprobe.store.store import Store

EventState = Literal["firing", "resolved", "local"]
_C = alert_events.c


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """One transition of one agent × target (a quorum alert: of each agreeing pair)."""

    rule: str
    agent_id: str
    target_id: str
    metric: str
    value: float | None               # what this agent saw in the window (a quorum alert: its own value)
    threshold: float
    state: EventState                 # firing | resolved | local (raised, seen by fewer than quorum)
    at: datetime                      # end of the window of the transition
    datacenter: str | None = None
    line: str | None = None
    local: bool = False               # a local alert (raised as `local`, or its `resolved`)
    scope: str | None = None          # quorum rules: region | isp
    scope_value: str | None = None
    quorum: int | None = None
    agents: tuple[str, ...] = ()      # quorum rules: the agents that agreed (local: this one)
    started_at: datetime | None = None
    details: Mapping[str, Any] = field(default_factory=dict)   # e.g. the group's value, each agent's value
    id: int | None = None


_FIELDS = tuple(f.name for f in fields(AlertEvent))     # each one's column, of the same name


def _row(e: AlertEvent) -> dict[str, Any]:
    row = {name: getattr(e, name) for name in _FIELDS if name != "id"}
    return {**row, "agents": list(e.agents) or None, "details": dict(e.details) or None}


def _event(r: Mapping[Any, Any]) -> AlertEvent:
    agents, details = r["agents"], r["details"]
    return AlertEvent(**{**{name: r[name] for name in _FIELDS}, "local": bool(r["local"]),
                         "agents": tuple(str(a) for a in agents) if isinstance(agents, list) else (),
                         "details": details if isinstance(details, dict) else {}})


async def insert(conn: AsyncConnection, events: Sequence[AlertEvent]) -> None:
    """Inside the caller's transaction (the rule's locked one, netprobe.store.alert_states)."""
    if events:
        await conn.execute(alert_events.insert(), [_row(e) for e in events])


async def history(store: Store, agent_id: str, target_id: str, since: datetime, until: datetime,
                  limit: int = 500) -> list[AlertEvent]:
    """One agent × target's events in [since, until), newest first (at most `limit`)."""
    q = (select(alert_events).where(_C.agent_id == agent_id, _C.target_id == target_id, _C.at >= since,
                                    _C.at < until)
         .order_by(_C.at.desc(), _C.id.desc()).limit(limit))
    async with store._read("reading alert history from") as conn:
        return [_event(r) for r in (await conn.execute(q)).mappings()]


async def firing(store: Store, agent_id: str | None = None, target_id: str | None = None
                 ) -> list[AlertEvent]:
    """The alerts open now, per rule × agent × target × local: each one's newest event (firing or
    local), optionally of one agent and/or target; by agent, target, rule."""
    later = alert_events.alias("later")
    newer = exists().where(and_(later.c.rule == _C.rule, later.c.agent_id == _C.agent_id,
                                later.c.target_id == _C.target_id, later.c.local == _C.local,
                                later.c.id > _C.id))
    q = select(alert_events).where(_C.state != "resolved", ~newer)
    if agent_id is not None:
        q = q.where(_C.agent_id == agent_id)
    if target_id is not None:
        q = q.where(_C.target_id == target_id)
    q = q.order_by(_C.agent_id, _C.target_id, _C.rule, _C.local)
    async with store._read("reading firing alerts from") as conn:
        return [_event(r) for r in (await conn.execute(q)).mappings()]

