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

from netprobe.probes.icmp import IcmpResult
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
