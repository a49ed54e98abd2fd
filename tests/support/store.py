"""Shared builders for the store tests (no tests here): real envelopes via netprobe.probes.results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from netprobe.probes.icmp.runtime import IcmpResult
from netprobe.probes.owd.client import Exchange, Reply
from netprobe.probes.owd.figures import figures as owd_figures
from netprobe.probes.owd.runtime import OwdResult
from netprobe.probes.results import envelope
from netprobe.stats import jitter, loss_pct, rtt_stats
from netprobe.store import Store
from netprobe.store.engine import AsyncConnection, create_engine
from netprobe.store.envelopes import Envelope, parse_envelopes
from netprobe.store.events import PathEvent
from netprobe.store.reads import utc
from netprobe.store.rollups import HOUR, Rollup, hour_of
from netprobe.store.schema import metadata, rollups_hourly
from netprobe.store.urls import normalise_url

TABLES = {"agents", "targets", "probe_results", "rollups_hourly", "rollups_prefix", "path_changes",
          "alert_states", "outbox"}
AGENT = {"id": "sh-ct-1", "region": "cn-east", "isp": "telecom", "timezone": "Asia/Shanghai"}
TARGET = {"id": "hk-cn2", "host": "hk1.example.net", "datacenter": "hk", "line": "cn2-gia"}


def icmp_envelope(started_at: datetime, samples: Sequence[float | None], *, agent: str | None = None,
                  target: str | None = None, result_id: str | None = None,
                  duplicates: int = 0) -> dict[str, Any]:
    got = [s for s in samples if s is not None]
    result = IcmpResult(
        probe="icmp", host=TARGET["host"], started_at=started_at, address="198.18.0.2",
        status="ok" if got else "down", sent=len(samples), received=len(got), duplicates=duplicates,
        loss_pct=loss_pct(len(samples), len(got)), rtt_ms=rtt_stats(got), jitter_ms=jitter(samples),
        samples_ms=list(samples))
    return envelope(result, {**AGENT, "id": agent or AGENT["id"]}, {**TARGET, "id": target or TARGET["id"]},
                    result_id=result_id)


def owd_envelope(started_at: datetime, *, sent: int = 10, fwd_lost: Sequence[int] = (3,),
                 ret_lost: Sequence[int] = (7,), agent: str | None = None, target: str | None = None
                 ) -> dict[str, Any]:
    """An owd round as an agent makes it: its figures computed from an exchange with the reflector
    (20 ms out, 30 ms back, the reflector holding each request 0.1 ms), some requests lost each way."""
    ms = 1_000_000
    t0 = int(started_at.timestamp()) * 1000 * ms
    replies = []
    for seq in range(sent):
        if seq in fwd_lost or seq in ret_lost:
            continue
        t1 = t0 + seq * 100 * ms
        t2 = t1 + 20 * ms + seq * ms // 10          # the way out grows 0.1 ms a request, ...
        t3 = t2 + ms // 10
        replies.append(Reply(seq, t1, t2, t3, t3 + 30 * ms + seq * ms // 5))   # ... the way back 0.2 ms
    x = Exchange(sent=sent, replies=replies, seen_by_reflector=sent - len(fwd_lost), status_answered=True)
    f = owd_figures(x)
    result = OwdResult(
        probe="owd", host=TARGET["host"], started_at=started_at, address="198.18.0.2", status="ok", port=8473,
        sent=f.sent, received=f.received, loss_pct=f.loss_pct, fwd_loss_pct=f.fwd_loss_pct,
        ret_loss_pct=f.ret_loss_pct, rtt_ms=f.rtt, jitter_ms=jitter(f.samples_ms),
        fwd_delay_var_ms=f.fwd_delay_var, ret_delay_var_ms=f.ret_delay_var, samples_ms=list(f.samples_ms))
    return envelope(result, {**AGENT, "id": agent or AGENT["id"]}, {**TARGET, "id": target or TARGET["id"]})


def typed(envelopes: Iterable[Mapping[str, Any]]) -> list[Envelope]:
    """Envelopes built as JSON (the builders here) as Store.write takes them: each parsed once by the
    wire validator, as the collector and `db import` take theirs."""
    return parse_envelopes(list(envelopes))


@asynccontextmanager
async def connection(url: str) -> AsyncIterator[AsyncConnection]:
    """A connection of its own to the database at `url`, for a test that reads tables directly (a Store
    keeps its engine to itself); made as a store makes its own (netprobe.store.engine)."""
    engine = create_engine(normalise_url(url))
    try:
        async with engine.connect() as conn:
            yield conn
    finally:
        await engine.dispose()


def table_names(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def schema_diff(conn: Connection) -> list[object]:
    """Differences between the migrated schema and the models (empty when they agree)."""
    return list(compare_metadata(MigrationContext.configure(conn), metadata))


# -- reading a store back (its plain SQL, through reading()) ------------------------------------------
@dataclass(frozen=True, slots=True)
class _Figures:
    rounds: int
    error_rounds: int
    sent: int
    received: int
    duplicates: int
    loss_pct: float | None           # 100·(sent−received)/sent over the whole span
    loss_pct_mean: float | None      # mean of the rounds' own loss_pct
    samples: int                     # received RTT samples behind the quantiles
    rtt_min_ms: float | None
    rtt_max_ms: float | None
    rtt_avg_ms: float | None
    rtt_p50_ms: float | None         # from the merged DDSketch (±1 %)
    rtt_p95_ms: float | None
    rtt_p99_ms: float | None
    jitter_ms: float | None          # mean of the rounds' jitter
    # the probes' own figures (rollup_figures(): sse's gap_p95_ms, stalls_per_min, …), also readable
    # as attributes
    extra: Mapping[str, float | None]

    def __getattr__(self, name: str) -> float | None:
        # only called when `name` is not a field: a probe's figure
        if name == "extra" or name.startswith("__"):
            raise AttributeError(name)   # copy/pickle asking before the fields are set
        try:
            return self.extra[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} has no figure {name!r}") from None


@dataclass(frozen=True, slots=True)
class HourRow(_Figures):
    agent_id: str
    target_id: str
    probe: str
    hour: datetime                   # UTC start of the hour
    rollup: Rollup = field(repr=False, compare=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HourRow:
        rollup = Rollup.from_row(row)
        return cls(agent_id=row["agent_id"], target_id=row["target_id"], probe=row["probe"],
                   hour=row["hour"], rollup=rollup, **_fields(rollup))

    def to_dict(self) -> dict[str, Any]:
        d = {**{k: getattr(self, k) for k in _FIGURES}, **self.extra}
        return {"agent_id": self.agent_id, "target_id": self.target_id, "probe": self.probe,
                "hour": self.hour.isoformat().replace("+00:00", "Z"), **d}


@dataclass(frozen=True, slots=True)
class WindowStats(_Figures):
    start: datetime                  # first hour merged
    end: datetime                    # end of the last hour merged
    hours: int                       # hour rows merged (across agents/targets when not filtered)
    rollup: Rollup = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = {**{k: getattr(self, k) for k in _FIGURES}, **self.extra}
        return {"start": self.start.isoformat().replace("+00:00", "Z"),
                "end": self.end.isoformat().replace("+00:00", "Z"), "hours": self.hours, **d}


_FIGURES = tuple(k for k in _Figures.__dataclass_fields__ if k != "extra")


def _fields(rollup: Rollup) -> dict[str, Any]:
    """Rollup.figures as _Figures' fields: the common ones, and the probes' under `extra`."""
    figures = rollup.figures()
    common = {k: figures.pop(k) for k in _FIGURES}
    return {**common, "extra": figures}


def merge_hours(rows: Iterable[HourRow]) -> WindowStats | None:
    """Merge any set of hour rows (several agents, targets, non-contiguous hours); None if empty."""
    total = Rollup()
    hours: list[datetime] = []
    for row in rows:
        total.merge(row.rollup)
        hours.append(row.hour)
    if not hours:
        return None
    return WindowStats(start=min(hours), end=max(hours) + HOUR, hours=len(hours), rollup=total,
                       **_fields(total))


_HOUR_COLS = [c.name for c in rollups_hourly.c]


async def hourly(store: Store, agent_id: str | None, target_id: str | None, probe: str | None,
                 start: datetime, end: datetime) -> list[HourRow]:
    """Hour rows overlapping [start, end), oldest first; None for an id means every one."""
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware (UTC), got a naive datetime")
    where, params = _where({"agent_id": agent_id, "target_id": target_id, "probe": probe},
                           ("hour", ">=", hour_of(start)), ("hour", "<", end))
    sql = (f"SELECT {', '.join(_HOUR_COLS)} FROM rollups_hourly{where}"
           " ORDER BY hour, agent_id, target_id, probe")
    async with store.reading("reading rollups from") as conn:
        rows = await conn.fetch(sql, params)
    out = []
    for r in rows:
        row = dict(zip(_HOUR_COLS, r, strict=True))
        out.append(HourRow.from_row({**row, "hour": utc(row["hour"])}))
    return out


async def window_stats(store: Store, agent_id: str | None, target_id: str | None, probe: str | None,
                       start: datetime, end: datetime, *,
                       hours: Callable[[datetime], bool] | None = None) -> WindowStats | None:
    """Merge the hours overlapping [start, end) (optionally only those `hours(hour_start)` keeps)
    across whatever agents/targets match; None when nothing was measured."""
    rows = await hourly(store, agent_id, target_id, probe, start, end)
    return merge_hours(r for r in rows if hours is None or hours(r.hour))


def _where(equal: Mapping[str, Any], *ranges: tuple[str, str, datetime | None]) -> tuple[str, dict[str, Any]]:
    """A WHERE clause (or "") of `column = value` for each value not None and `column op time` for each
    range whose time is not None, with its parameters."""
    clauses, params = [], {}
    for col, value in equal.items():
        if value is not None:
            clauses.append(f"{col} = %({col})s")
            params[col] = value
    for i, (col, op, ts) in enumerate(ranges):
        if ts is not None:
            if ts.tzinfo is None:
                raise ValueError(f"{col} must be timezone-aware (UTC), got a naive datetime")
            clauses.append(f"{col} {op} %(t{i})s")
            params[f"t{i}"] = ts
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


async def count_results(store: Store, agent_id: str | None = None, target_id: str | None = None,
                        probe: str | None = None, start: datetime | None = None,
                        end: datetime | None = None) -> int:
    """Raw rounds stored (started_at in [start, end)); None for a filter means every one."""
    where, params = _where({"agent_id": agent_id, "target_id": target_id, "probe": probe},
                           ("started_at", ">=", start), ("started_at", "<", end))
    async with store.reading("counting results in") as conn:
        [(n,)] = await conn.fetch(f"SELECT count(*) FROM probe_results{where}", params)
    return int(n)


@dataclass(frozen=True, slots=True)
class StoredPathEvent(PathEvent):
    """A route event as path_events reads it back: with its row id (insertion order)."""

    id: int


async def path_events(store: Store, agent_id: str | None = None, target_id: str | None = None,
                      kind: str | None = None, since: datetime | None = None,
                      direction: str | None = None) -> list[StoredPathEvent]:
    """Route events (kind path_change, line_mismatch or return_line_mismatch; direction forward or
    return) detected at or after `since`, oldest first. None for a filter means every one."""
    where, params = _where({"agent_id": agent_id, "target_id": target_id, "kind": kind,
                            "direction": direction}, ("detected_at", ">=", since))
    sql = ("SELECT id, agent_id, target_id, detected_at, kind, old_hash, new_hash, label, details, direction"
           f" FROM path_changes{where} ORDER BY detected_at, id")
    async with store.reading("reading path events from") as conn:
        rows = await conn.fetch(sql, params)
    out = []
    for id_, agent, target, at, kind_, old, new, label, details, way in rows:
        if store.dialect == "sqlite" and isinstance(details, str):     # JSON text there, JSONB's value here
            details = json.loads(details)
        out.append(StoredPathEvent(id=id_, agent_id=agent, target_id=target, detected_at=utc(at), kind=kind_,
                                   old_hash=old, new_hash=new, label=label, details=details, direction=way))
    return out
