"""The alert state machine (pure) and its rows in `alert_states` (one per rule × agent × target).

    ok ──bad──▶ pending ──(for_windows bad in a row)──▶ firing ──clear──▶ ok
     ▲            │ not bad                              │ bad or between: stays firing
     └────────────┘

A window without data changes nothing. Only ok/pending → firing ("firing") and firing → ok
("resolved") are transitions worth a notification.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from netprobe.alerts.config import AlertRule
from netprobe.results import iso
from netprobe.store.engine import AsyncConnection
from netprobe.store.schema import alert_states

State = Literal["ok", "pending", "firing"]
Transition = Literal["firing", "resolved"]
Key = tuple[str, str]            # agent_id, target_id
_C = alert_states.c


@dataclass(frozen=True, slots=True)
class AlertState:
    """One rule × agent × target, as of the end of `window_end` (the last window evaluated)."""

    rule: str
    agent_id: str
    target_id: str
    state: State = "ok"
    bad_windows: int = 0                 # bad windows in a row (while pending or firing)
    value: float | None = None           # the last window's value that had data
    probe: str | None = None             # which probe's rounds gave it
    started_at: datetime | None = None   # start of the first bad window of the streak
    fired_at: datetime | None = None     # end of the window that raised it
    window_end: datetime | None = None   # end of the last window evaluated

    @property
    def key(self) -> Key:
        return (self.agent_id, self.target_id)


def step(rule: AlertRule, current: AlertState, value: float | None, probe: str | None,
         window_start: datetime, window_end: datetime) -> tuple[AlertState, Transition | None]:
    """The state after one window whose value is `value` (None: no data, nothing changes)."""
    if value is None:
        return replace(current, window_end=window_end), None
    seen = replace(current, value=value, probe=probe, window_end=window_end)
    bad = rule.is_bad(value)
    if current.state == "firing":
        if rule.is_clear(value):
            return replace(seen, state="ok", bad_windows=0, started_at=None, fired_at=None), "resolved"
        # between the thresholds, or still bad: hysteresis keeps it firing
        return replace(seen, bad_windows=current.bad_windows + bad), None
    if not bad:
        return replace(seen, state="ok", bad_windows=0, started_at=None, fired_at=None), None
    streak = current.bad_windows + 1
    started = current.started_at if current.state == "pending" and current.started_at else window_start
    if streak >= rule.for_windows:
        return replace(seen, state="firing", bad_windows=streak, started_at=started, fired_at=window_end), \
            "firing"
    return replace(seen, state="pending", bad_windows=streak, started_at=started, fired_at=None), None


# -- persistence ----------------------------------------------------------------------------------

def _lock_id(rule: str) -> int:
    # a stable signed 64-bit id per rule for pg_advisory_xact_lock
    return zlib.crc32(f"netprobe.alerts:{rule}".encode()) - (1 << 31)


async def lock_rule(conn: AsyncConnection, rule: str) -> None:
    """Serialise evaluators of one rule (several collectors on one PostgreSQL) for this transaction;
    SQLite's write transaction is exclusive already."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _lock_id(rule)})


def _dt(value: Any) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None


def from_row(row: Mapping[str, Any]) -> AlertState:
    details = row.get("details") or {}
    state: State = row["state"] if row["state"] in ("ok", "pending", "firing") else "ok"
    return AlertState(rule=row["rule"], agent_id=row["agent_id"], target_id=row["target_id"], state=state,
                      bad_windows=int(row["bad_windows"] or 0), value=row["value"],
                      probe=details.get("probe"), started_at=row["started_at"],
                      fired_at=_dt(details.get("fired_at")), window_end=_dt(details.get("window_end")))


def to_row(s: AlertState, rule: AlertRule, now: datetime) -> dict[str, Any]:
    details = {"window_end": iso(s.window_end) if s.window_end else None, "window_s": int(rule.window),
               "metric": rule.metric, "probe": s.probe, "fired_at": iso(s.fired_at) if s.fired_at else None}
    return {"rule": s.rule, "agent_id": s.agent_id, "target_id": s.target_id, "state": s.state,
            "bad_windows": s.bad_windows, "value": s.value, "started_at": s.started_at, "updated_at": now,
            "details": details}


async def load(conn: AsyncConnection, rule: str) -> dict[Key, AlertState]:
    rows = (await conn.execute(select(alert_states).where(_C.rule == rule))).mappings()
    return {(r["agent_id"], r["target_id"]): from_row(dict(r)) for r in rows}


async def save(conn: AsyncConnection, states: Iterable[AlertState], rule: AlertRule, now: datetime) -> None:
    rows = [to_row(s, rule, now) for s in sorted(states, key=lambda s: s.key)]   # sorted: lock order
    if not rows:
        return
    stmt = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(alert_states)
    stmt = stmt.on_conflict_do_update(
        index_elements=["rule", "agent_id", "target_id"],
        set_={c: stmt.excluded[c] for c in ("state", "bad_windows", "value", "started_at", "updated_at",
                                             "details")})
    await conn.execute(stmt, rows)


def cursor(states: Iterable[AlertState]) -> datetime | None:
    """End of the last window evaluated for a rule: the latest any of its rows records."""
    ends = [s.window_end for s in states if s.window_end is not None]
    return max(ends) if ends else None
