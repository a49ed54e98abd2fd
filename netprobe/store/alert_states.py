"""The alert_states table: where each alert rule × agent × target stands, read and written per rule.

A rule's rows are rewritten in one transaction that first takes the rule's lock, so several
collectors on one PostgreSQL apply each window once between them (netprobe.alerts.engine)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text

from netprobe.store import alert_events
from netprobe.store.engine import AsyncConnection, upsert
from netprobe.store.schema import alert_states
from netprobe.store.store import Store
from netprobe.times import iso

_C = alert_states.c
_LOCK = text("SELECT pg_advisory_xact_lock(:id)")


@dataclass(frozen=True, slots=True)
class AlertStateRow:
    """One row as stored (the details column's fields typed)."""

    rule: str
    agent_id: str
    target_id: str
    state: str
    bad_windows: int
    value: float | None
    started_at: datetime | None
    probe: str | None = None
    fired_at: datetime | None = None
    window_end: datetime | None = None
    window_s: int | None = None
    metric: str | None = None
    local: bool = False                              # quorum rules: a pair's alert is local (last mile)
    members: tuple[tuple[str, str], ...] = ()        # quorum groups: agent × target pairs that agreed
    group: tuple[str, str, str, str] | None = None   # quorum groups: scope, scope value, datacenter, line

    @property
    def key(self) -> tuple[str, str]:
        return (self.agent_id, self.target_id)


def _dt(value: Any) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None


def _from_db(row: Mapping[Any, Any]) -> AlertStateRow:
    details = row.get("details")
    if not isinstance(details, dict):
        details = {}
    window_s = details.get("window_s")
    metric = details.get("metric")
    members = details.get("members")
    group = details.get("group")
    return AlertStateRow(rule=row["rule"], agent_id=row["agent_id"], target_id=row["target_id"],
                         state=row["state"], bad_windows=int(row["bad_windows"] or 0), value=row["value"],
                         started_at=row["started_at"], probe=details.get("probe"),
                         fired_at=_dt(details.get("fired_at")), window_end=_dt(details.get("window_end")),
                         window_s=window_s if isinstance(window_s, int) else None,
                         metric=metric if isinstance(metric, str) else None,
                         local=details.get("local") is True,
                         members=tuple((str(a), str(t)) for a, t in members)
                         if isinstance(members, list) else (),
                         group=(str(group[0]), str(group[1]), str(group[2]), str(group[3]))
                         if isinstance(group, list) and len(group) == 4 else None)


def _to_db(r: AlertStateRow, now: datetime) -> dict[str, Any]:
    details: dict[str, Any] = {
        "window_end": iso(r.window_end) if r.window_end else None, "window_s": r.window_s,
        "metric": r.metric, "probe": r.probe, "fired_at": iso(r.fired_at) if r.fired_at else None}
    if r.local:
        details["local"] = True
    if r.members:
        details["members"] = [list(m) for m in r.members]
    if r.group is not None:
        details["group"] = list(r.group)
    return {"rule": r.rule, "agent_id": r.agent_id, "target_id": r.target_id, "state": r.state,
            "bad_windows": r.bad_windows, "value": r.value, "started_at": r.started_at, "updated_at": now,
            "details": details}


def _lock_id(rule: str) -> int:
    # a stable signed 64-bit id per rule for pg_advisory_xact_lock
    return zlib.crc32(f"netprobe.alerts:{rule}".encode()) - (1 << 31)


async def _load(conn: AsyncConnection, rule: str) -> list[AlertStateRow]:
    return [_from_db(r) for r in (await conn.execute(select(alert_states).where(_C.rule == rule))).mappings()]


class RuleRows:
    """A rule's rows inside its locked transaction."""

    def __init__(self, conn: AsyncConnection, rows: list[AlertStateRow]) -> None:
        self._conn = conn
        self.rows = rows

    async def save(self, rows: Iterable[AlertStateRow], now: datetime) -> None:
        values = [_to_db(r, now) for r in sorted(rows, key=lambda r: r.key)]   # sorted: lock order
        if not values:
            return
        stmt = upsert(self._conn.dialect.name, alert_states)
        stmt = stmt.on_conflict_do_update(
            index_elements=["rule", "agent_id", "target_id"],
            set_={c: stmt.excluded[c] for c in ("state", "bad_windows", "value", "started_at", "updated_at",
                                                 "details")})
        await self._conn.execute(stmt, values)

    async def record(self, events: Sequence[alert_events.AlertEvent]) -> None:
        """The transitions these rows went through (alert_events), in the same transaction."""
        await alert_events.insert(self._conn, events)


class AlertStates:
    """alert_states of an open Store; errors are StorageError."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def load(self, rule: str) -> list[AlertStateRow]:
        async with self._store._read("evaluating alerts in") as conn:
            return await _load(conn, rule)

    @asynccontextmanager
    async def locked(self, rule: str) -> AsyncIterator[RuleRows]:
        """A write transaction holding `rule`'s lock (PostgreSQL: an advisory lock; SQLite's write
        transaction is exclusive already), with the rule's rows as they are under it."""
        async with self._store._write("evaluating alerts in") as conn:
            if conn.dialect.name == "postgresql":
                await conn.execute(_LOCK, {"id": _lock_id(rule)})
            yield RuleRows(conn, await _load(conn, rule))
