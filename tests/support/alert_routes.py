"""The open alerts of a store grouped per route (rule × datacenter × line), from alert_events.firing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from netprobe.store import Store
from netprobe.store.alert_events import AlertEvent, firing


@dataclass(frozen=True, slots=True)
class RouteAlert:
    """An open alert per rule × datacenter × line: the agents it is open for."""

    rule: str
    datacenter: str | None
    line: str | None
    metric: str
    local: bool
    scope: str | None
    scope_value: str | None
    agents: tuple[str, ...]
    targets: tuple[str, ...]
    since: datetime                   # the earliest of their events


async def firing_routes(store: Store) -> list[RouteAlert]:
    """The open alerts grouped per rule × datacenter × line × local (and quorum scope); by datacenter,
    line, rule."""
    groups: dict[tuple[Any, ...], list[AlertEvent]] = {}
    for e in await firing(store):
        groups.setdefault((e.rule, e.datacenter, e.line, e.local, e.scope, e.scope_value), []).append(e)
    out = [RouteAlert(rule=rule, datacenter=dc, line=line, metric=events[0].metric, local=local, scope=scope,
                      scope_value=value, agents=tuple(sorted({e.agent_id for e in events})),
                      targets=tuple(sorted({e.target_id for e in events})),
                      since=min(e.started_at or e.at for e in events))
           for (rule, dc, line, local, scope, value), events in groups.items()]
    return sorted(out, key=lambda r: (r.datacenter or "", r.line or "", r.rule, r.local, r.scope_value or ""))
