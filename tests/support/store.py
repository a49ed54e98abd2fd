"""Shared builders for the store tests (no tests here): real envelopes via netprobe.probes.results."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
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
from netprobe.store.engine import AsyncConnection, create_engine
from netprobe.store.envelopes import Envelope, parse_envelopes
from netprobe.store.schema import metadata
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
