"""The Store: idempotent writes of result envelopes with hourly rollups, retention, window queries."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from operator import attrgetter
from typing import Any

import orjson
from sqlalchemy import Select, bindparam, delete, select, text, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError

from netprobe.errors import StorageError
from netprobe.store import engine, events, migrate, outbox, prefix_sql, reads, routes
from netprobe.store import sketch as sketches
from netprobe.store.engine import READ_ONLY, AsyncConnection, AsyncEngine, create_engine, mapped_errors
from netprobe.store.envelopes import Envelope, stored_envelope
from netprobe.store.rollups import HourKey, Rollup, hour_deltas
from netprobe.store.schema import (
    UTCDateTime,
    agents,
    probe_results,
    rollups_hourly,
    store_meta,
    targets,
)
from netprobe.store.urls import default_db_url, display_url, normalise_url, sqlite_path
from netprobe.times import utc_now

DEFAULT_RAW_RETENTION_DAYS = 14.0
_HORIZON = "raw_horizon"      # store_meta key: raw rounds before this were deleted by retention
_R = rollups_hourly.c
_PK = (_R.agent_id, _R.target_id, _R.probe, _R.hour)
_PG_INSERT_RESULTS = text(
    "INSERT INTO probe_results (id, probe, agent_id, target_id, started_at, status, envelope, stored_at) "
    "SELECT r.id, r.probe, r.agent_id, r.target_id, r.started_at, r.status, e.envelope, :now "
    "FROM unnest(CAST(:ids AS text[]), CAST(:probes AS text[]), CAST(:agents AS text[]), "
    "CAST(:targets AS text[]), CAST(:starts AS timestamptz[]), CAST(:statuses AS text[])) "
    "WITH ORDINALITY AS r(id, probe, agent_id, target_id, started_at, status, n) "
    "JOIN jsonb_array_elements(CAST(:envelopes AS jsonb)) WITH ORDINALITY AS e(envelope, n) ON e.n = r.n "
    "ORDER BY r.n "
    "ON CONFLICT (id) DO NOTHING RETURNING id"
).bindparams(bindparam("now", type_=UTCDateTime()))
# Rollup hour rows on PostgreSQL: the keys to create, then the merged rows, each as one JSON array of
# rows (json_populate_recordset types each field as its column): one statement each rather than one
# per hour row, and orjson rather than psycopg quoting every value.
_ROLLUP_VALUES = tuple(Rollup().to_row())
_KEY = tuple(str(c.name) for c in _PK)        # str: orjson keys
_ROLLUP_COLS = (*_KEY, *_ROLLUP_VALUES, "updated_at")


def _same_key(a: str, b: str) -> str:
    """SQL: rows `a` and `b` have the same rollup key."""
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in _KEY)


# New hour rows, inserted in key order; returned: the positions (1-based) of the rows that were there
# already (usually none), to be merged into.
_PG_INSERT_HOURS = text(
    "WITH v AS (SELECT * FROM json_populate_recordset(NULL::rollups_hourly, CAST(:rows AS json)) "
    "WITH ORDINALITY), "
    f"ins AS (INSERT INTO rollups_hourly ({', '.join(_ROLLUP_COLS)}) "
    f"SELECT {', '.join('v.' + c for c in _ROLLUP_COLS)} FROM v ORDER BY v.ordinality "
    f"ON CONFLICT ({', '.join(_KEY)}) DO NOTHING RETURNING {', '.join(_KEY)}) "
    f"SELECT v.ordinality FROM v WHERE NOT EXISTS (SELECT FROM ins WHERE {_same_key('ins', 'v')})")
# The hour rows to merge into, locked in key order. Not `(agent_id, …, hour) IN (…)`: PostgreSQL tests
# that list against every row of the table.
_PG_LOCK_HOURS = text(
    "SELECT r.* FROM rollups_hourly AS r "
    "JOIN json_populate_recordset(NULL::rollups_hourly, CAST(:rows AS json)) AS v "
    f"ON {_same_key('r', 'v')} ORDER BY {', '.join('r.' + c for c in _KEY)} FOR UPDATE OF r"
).columns(*rollups_hourly.c)
_PG_UPDATE_HOURS = text(
    "UPDATE rollups_hourly AS r SET "
    + ", ".join(f"{c} = v.{c}" for c in (*_ROLLUP_VALUES, "updated_at"))
    + " FROM json_populate_recordset(NULL::rollups_hourly, CAST(:rows AS json)) AS v "
    + f"WHERE {_same_key('r', 'v')}")


# A bulk write on PostgreSQL (Store.write(bulk=True), `db import`): the rows that are not there yet go in
# by COPY, which PostgreSQL parses and inserts for less than the statements above (no JSON rows to
# parse and join, no sort, inserts a page at a time). Which rows are there already is read first; a row
# another writer inserts in between makes the COPY fail on its unique key, and the batch then takes
# the statements above, so the outcome is the same as theirs.
_PG_KNOWN_RESULTS = text(
    "SELECT p.id FROM json_array_elements_text(CAST(:ids AS json)) AS k(id) "
    "JOIN probe_results AS p ON p.id = k.id")
_PG_COPY_RESULTS = ("COPY probe_results (id, probe, agent_id, target_id, started_at, status, envelope, "
                    "stored_at) FROM STDIN")
_PG_KNOWN_HOURS = text(
    "SELECT v.ordinality FROM json_populate_recordset(NULL::rollups_hourly, CAST(:rows AS json)) "
    f"WITH ORDINALITY AS v JOIN rollups_hourly AS r ON {_same_key('r', 'v')}")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """A string as a field of COPY's text format."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


# SQLite: the batch's existing hour rows (by position in the JSON array of keys), and the statements
# for sqlite3's executemany.
_SQLITE_READ_HOURS = (
    f"SELECT j.key, {', '.join('r.' + c for c in _ROLLUP_VALUES)} FROM json_each(?) AS j "
    "CROSS JOIN rollups_hourly AS r ON "
    + " AND ".join(f"r.{c} = json_extract(j.value, '$[{i}]')" for i, c in enumerate(_KEY)))
_SQLITE_INSERT_HOURS = (f"INSERT INTO rollups_hourly ({', '.join(_ROLLUP_COLS)}) "
                        f"VALUES ({', '.join('?' for _ in _ROLLUP_COLS)})")
_SQLITE_UPDATE_HOURS = ("UPDATE rollups_hourly SET "
                        + ", ".join(f"{c} = ?" for c in (*_ROLLUP_VALUES, "updated_at"))
                        + " WHERE " + " AND ".join(f"{c} = ?" for c in _KEY))


def _jsonable(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Every number as orjson writes it faithfully: no inf/NaN (it would write null), no integer past
    64 bits (it refuses). Rows with one (absurd counts or sums) take the executemany path, whose
    errors stay what they were."""
    return all(math.isfinite(v) if type(v) is float else -(1 << 63) <= v < (1 << 63)
               for row in rows for v in row.values() if type(v) is float or type(v) is int)


Delta = tuple[Rollup, sketches.Bins | None]     # an hour's counters, and its samples' sketch


_COUNTERS = attrgetter(*Rollup._COLUMNS)


def _texts(delta: Delta) -> tuple[str | None, str | None]:
    """The sketch and extras columns of a row holding `delta` alone: Rollup.to_row's, with the sketch
    from its Bins when it has them."""
    rollup, bins = delta
    if bins is not None:
        sketch: str | None = sketches.bins_text(bins)
    else:
        sketch = sketches.dumps(rollup.sketch) if rollup.sketch is not None else None
    extras = json.dumps(rollup.extras, separators=(",", ":")) if rollup.extras else None
    return sketch, extras


def _hour_values(delta: Delta) -> tuple[Any, ...]:
    """The value columns (_ROLLUP_VALUES' order) of a row holding `delta` alone."""
    return (*_COUNTERS(delta[0]), *_texts(delta))


_PG_COPY_HOURS = f"COPY rollups_hourly ({', '.join(_ROLLUP_COLS)}) FROM STDIN"
_INT64 = 1 << 63
_NULL = "\\N"     # COPY's NULL


def _hour_line(key: HourKey, delta: Delta, hour: str, updated: str) -> str | None:
    """A new hour row holding `delta` alone as a line of COPY's text format (`hour`: the key's hour,
    formatted); None when a count is past 64 bits (the statements' path then says what is wrong)."""
    values = _hour_values(delta)
    if not all(-_INT64 <= v < _INT64 for v in values if type(v) is int):
        return None
    a, t, p, _ = key
    fields = "\t".join([_NULL if v is None else _copy_text(v) if type(v) is str else repr(v) for v in values])
    return f"{_copy_text(a)}\t{_copy_text(t)}\t{_copy_text(p)}\t{hour}\t{fields}\t{updated}\n"


def _finite(delta: Delta) -> bool:
    """No inf/NaN among the float counters (orjson would write null): their sum is finite. A sum that
    overflows merely sends the row the slow way."""
    r = delta[0]
    return math.isfinite(r.loss_pct_sum + r.rtt_sum + r.jitter_sum + (r.rtt_min or 0.0) + (r.rtt_max or 0.0))


def _hour_row(key: HourKey, delta: Delta, now: datetime) -> dict[str, Any]:
    return dict(zip(_ROLLUP_COLS, (*key, *_hour_values(delta), now), strict=True))


def _merged(row: Mapping[Any, Any], delta: Delta) -> Delta:
    """An existing row's content merged with `delta`, as Rollup.merge would merge them; the sketch
    merged as its stored text (Bins) when it is in the default format, else through DDSketch."""
    rollup, bins = delta
    merged = Rollup.from_row(row, sketch=False)
    merged.merge(rollup)
    text = row["sketch"]
    if bins is None:
        if text:
            merged.sketch = sketches.loads(text)
        return merged, None
    if not text:
        return merged, bins
    mine = sketches.bins_from_text(text)
    if mine is None:
        merged.sketch = sketches.loads(text)
        merged.sketch.merge(sketches.sketch_of(bins))
        return merged, None
    sketches.merge_bins(mine, bins)
    return merged, mine


_SQLITE_KNOWN_RESULTS = "SELECT id FROM probe_results WHERE id IN (SELECT value FROM json_each(?))"
_SQLITE_INSERT_RESULTS = ("INSERT INTO probe_results (id, probe, agent_id, target_id, started_at, status, "
                          "envelope, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")   # envelope: _sqlite_json's


def _iso(ts: datetime, timespec: str = "auto") -> str:
    return (ts.astimezone(UTC) if ts.tzinfo is not None else ts).replace(tzinfo=None).isoformat(" ", timespec)


_PROBES = (datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC), datetime(987, 6, 5, 4, 3, 2, 1, tzinfo=UTC),
           datetime(2026, 11, 20, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=8))),
           datetime(2026, 1, 1))


def _stamp(conn: AsyncConnection) -> Callable[[datetime], str]:
    """A datetime as SQLAlchemy stores it in a SQLite UTCDateTime column: isoformat when that writes
    the very same text (far cheaper than SQLAlchemy's processor), else the processor itself."""
    process = _R.hour.type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
    assert process is not None
    for timespec in ("microseconds", "auto"):
        fast = functools.partial(_iso, timespec=timespec)
        if all(fast(ts) == process(ts) for ts in _PROBES):
            return fast
    return process

_PING = text("SELECT 1")
_ASYNC_COMMIT = text("SET LOCAL synchronous_commit = off")
_RESULT_COLUMNS = tuple(probe_results.c[n] for n in ("id", "probe", "agent_id", "target_id", "started_at",
                                                     "status", "envelope"))
_READ_HORIZON = select(store_meta.c.value).where(store_meta.c.key == _HORIZON)   # built once: every write
REFS_REFRESH_S = 60.0      # an unchanged agent/target row is rewritten (last_seen) at most this often
# FOR NO KEY UPDATE, the lock the upsert's UPDATE takes: it serialises writers of one target as that
# does, and unlike FOR UPDATE it lets inserts check their foreign keys (FOR KEY SHARE, in result-id
# order) against the locked rows. FOR UPDATE made two writers deadlock on each other's targets.
_LOCK_TARGETS = (select(targets.c.id).where(targets.c.id.in_(bindparam("ids", expanding=True)))
                 .order_by(targets.c.id).with_for_update(key_share=True))


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _sqlite_json(env: Envelope) -> str:
    """SQLite keeps JSON as text: the text received when there is one SQLite can take (UTF-8, so no
    lone surrogate), rather than serialising the envelope again."""
    if env.text is not None:
        with contextlib.suppress(UnicodeEncodeError):
            env.text.encode()
            return env.text
    return _json(env.raw)


@dataclass(frozen=True, slots=True)
class ResultRow:
    """A stored round as Store.results reads it: its indexed columns, and its envelope (typed, its JSON
    as written in `envelope.raw`)."""

    id: str
    probe: str
    agent_id: str
    target_id: str
    started_at: datetime
    status: str
    envelope: Envelope


@dataclass(frozen=True, slots=True)
class WriteStats:
    accepted: int        # newly stored (and rolled up)
    duplicates: int      # ids already stored, or repeated within the batch
    expired: int = 0     # older than the retention horizon: cannot be told apart from a replay, dropped
    outbox_dropped: int = 0  # oldest outbox rows dropped to keep it within its cap


def _first_hours(deltas: Mapping[HourKey, Any]) -> dict[prefix_sql.Series, datetime]:
    first: dict[prefix_sql.Series, datetime] = {}
    for a, t, p, h in deltas:
        if (a, t, p) not in first or h < first[(a, t, p)]:
            first[(a, t, p)] = h
    return first


def _aware(ts: datetime, name: str) -> datetime:
    if ts.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), got a naive datetime")
    return ts.astimezone(UTC)


class Store:
    """One database (SQLite or PostgreSQL). Create with open_store(); all methods are async."""

    def __init__(self, engine: AsyncEngine, url: URL) -> None:
        self._engine = engine
        self._url = url
        self.url = display_url(url)          # normalised, password masked
        # SQLite has one writer at a time: queue this process's writers here rather than in
        # SQLite's busy handler, which sleeps in steps of up to 100 ms.
        self._write_lock = asyncio.Lock() if url.get_backend_name() == "sqlite" else None
        # (table, id) -> the agent/target row as this process last wrote it, and when (monotonic)
        self._refs: dict[tuple[str, str], tuple[tuple[Any, ...], float]] = {}

    @property
    def display_url(self) -> str:
        return self.url

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @property
    def parallel_reads(self) -> int:
        """Reads worth running at once: two connections let the database answer one while this
        process works on another's rows; an in-memory SQLite database has one shared connection."""
        in_memory = self.dialect == "sqlite" and sqlite_path(self._url) is None
        return 1 if in_memory else 2

    async def close(self) -> None:
        await self._engine.dispose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- schema -----------------------------------------------------------------------------------
    async def upgrade(self, revision: str = "head") -> str | None:
        """Migrate to `revision` (default: latest); returns the revision the database is now at."""
        async with self._write("upgrading") as conn:
            return await conn.run_sync(migrate.upgrade, revision)

    async def downgrade(self, revision: str = "base") -> str | None:
        async with self._write("downgrading") as conn:
            return await conn.run_sync(migrate.downgrade, revision)

    async def revision(self) -> str | None:
        async with self._read("reading") as conn:
            return await conn.run_sync(migrate.current_revision)

    # -- writing ----------------------------------------------------------------------------------
    async def write(self, envelopes: Sequence[Envelope], *, outbox_cap: int | None = None,
                    bulk: bool = False) -> WriteStats:
        """Store result envelopes once each (by id); rolls up only the newly stored ones, atomically.

        Envelopes only: JSON is validated where it comes in (parse_envelopes), the agent's own rounds
        are typed by construction (envelope_of). With `outbox_cap`, the newly stored ones also enter
        the upload outbox in the same transaction, and the outbox is trimmed (oldest first) to that
        many rows. `bulk`: a bulk load that can be run again (`db import`): on PostgreSQL the new rows
        go in by COPY, and the commit does not wait for the WAL to reach the disk (synchronous_commit
        off, this transaction only); what is stored is the same.
        """
        unique: dict[str, Envelope] = {}
        for env in envelopes:
            if type(env) is not Envelope:
                raise TypeError(f"Store.write takes Envelopes (parse_envelopes, envelope_of), not "
                                f"{type(env).__name__}")
            unique.setdefault(env.id, env)
        repeated = len(envelopes) - len(unique)
        if not unique:
            return WriteStats(0, repeated)
        now = utc_now()
        refs: list[tuple[tuple[str, str], tuple[Any, ...]]] = []
        bulk = bulk and self.dialect == "postgresql"
        async with self._write("writing to") as conn:
            if bulk:
                await conn.execute(_ASYNC_COMMIT)
            horizon = await self._horizon(conn)
            fresh = sorted((e for e in unique.values() if horizon is None or e.started_at >= horizon),
                           key=lambda e: e.id)
            expired = len(unique) - len(fresh)
            inserted: set[str] = set()
            trimmed = 0
            if fresh:
                # Lock order everywhere: agents, targets, results, rollups, each sorted — no deadlocks.
                # Agent and target rows are never locked above FOR NO KEY UPDATE: the results'
                # foreign-key checks lock them FOR KEY SHARE in result order, which is not theirs.
                # Path events come last and lock nothing more: the target rows the upsert (or, when
                # it is skipped, _LOCK_TARGETS) holds until commit serialise writers of one target, so
                # each sees the other's results.
                refs = await self._upsert_refs(conn, fresh, now)
                if bulk:
                    inserted = await self._pg_copy_results(conn, fresh, now)
                else:
                    inserted = await self._insert_results(conn, fresh, now)
                new = [e for e in fresh if e.id in inserted]
                deltas = hour_deltas(new)
                await self._apply_rollups(conn, deltas, now, bulk=bulk)
                await prefix_sql.invalidate(conn, self.dialect, _first_hours(deltas), now)
                await events.record_new(conn, new)
                if outbox_cap is not None:
                    await outbox.enqueue(conn, [(e.id, e.raw) for e in new], now)
                    trimmed = await outbox.trim(conn, outbox_cap)
        clock = time.monotonic()
        for key, row in refs:         # committed: only now may later writes rely on them
            self._refs[key] = (row, clock)
        return WriteStats(accepted=len(inserted), duplicates=repeated + len(fresh) - len(inserted),
                          expired=expired, outbox_dropped=trimmed)

    # -- outbox (agent) ---------------------------------------------------------------------------
    async def outbox_depth(self) -> int:
        async with self._read("reading the outbox of") as conn:
            return await outbox.count(conn)

    async def outbox_oldest(self, limit: int, now: datetime) -> list[outbox.OutboxEntry]:
        async with self._read("reading the outbox of") as conn:
            return await outbox.oldest(conn, limit, _aware(now, "now"))

    async def outbox_remove(self, seqs: Sequence[int]) -> int:
        """Delete acknowledged (or rejected) entries; returns how many were still there."""
        async with self._write("acknowledging outbox entries in") as conn:
            return await outbox.remove(conn, seqs)

    async def outbox_failed(self, seqs: Sequence[int], error: str, retry_at: datetime) -> None:
        async with self._write("noting an upload failure in") as conn:
            await outbox.note_failure(conn, seqs, error, retry_at)

    async def _upsert_refs(self, conn: AsyncConnection, envs: Sequence[Envelope],
                           now: datetime) -> list[tuple[tuple[str, str], tuple[Any, ...]]]:
        """Create or update the batch's agent and target rows (info from each one's newest round in the
        batch) and bump last_seen; returns the rows written, for the caller to note once committed.

        A table's rows are skipped when each one is exactly as this process wrote it less than
        REFS_REFRESH_S ago: last_seen is then up to that much behind (a minute is its precision), and
        unchanged rows are not rewritten on every request. Any change (new id, other info, stale
        last_seen) rewrites all of the batch's rows of that table. Target rows are then
        still locked (FOR NO KEY UPDATE, as the upsert's UPDATE would) when the batch has mtr results
        for them: those locks serialise concurrent writers of one agent × target, so path events see
        each other's results (events.record_new)."""
        latest_agent: dict[str, Envelope] = {}
        latest_target: dict[str, Envelope] = {}
        for env in envs:
            for latest, key in ((latest_agent, str(env.agent["id"])), (latest_target, str(env.target["id"]))):
                if key not in latest or env.started_at >= latest[key].started_at:
                    latest[key] = env
        agent_rows: list[dict[str, Any]] = [
            {"id": k, "region": e.agent.get("region"), "isp": e.agent.get("isp"),
             "timezone": e.agent.get("timezone"), "info": e.agent, "first_seen": now, "last_seen": now}
            for k, e in sorted(latest_agent.items())]
        target_rows: list[dict[str, Any]] = [
            {"id": k, "host": e.target.get("host"), "datacenter": e.target.get("datacenter"),
             "line": e.target.get("line"), "info": e.target, "first_seen": now, "last_seen": now}
            for k, e in sorted(latest_target.items())]
        clock = time.monotonic()
        written: list[tuple[tuple[str, str], tuple[Any, ...]]] = []
        for table, rows, cols in ((agents, agent_rows, ("region", "isp", "timezone")),
                                  (targets, target_rows, ("host", "datacenter", "line"))):
            # info as its items, in order: SQLite keeps the JSON text as written
            mine: list[tuple[tuple[str, str], tuple[Any, ...]]] = [
                ((table.name, r["id"]), (*(r[c] for c in cols), list(r["info"].items()))) for r in rows]
            if all((known := self._refs.get(key)) is not None and known[0] == row
                   and clock - known[1] < REFS_REFRESH_S for key, row in mine):
                if table is targets and self.dialect == "postgresql":
                    routed = routes.route_probes()
                    mtr = sorted({str(e.target["id"]) for e in envs if e.probe in routed})
                    if mtr:
                        await conn.execute(_LOCK_TARGETS, {"ids": mtr})
                continue
            stmt = engine.upsert(self.dialect, table)
            stmt = stmt.on_conflict_do_update(
                index_elements=["id"],
                set_={c: stmt.excluded[c] for c in (*cols, "info", "last_seen")})
            await conn.execute(stmt, rows)
            written += mine
        return written

    async def _insert_results(self, conn: AsyncConnection, envs: Sequence[Envelope], now: datetime
                              ) -> set[str]:
        if self.dialect == "postgresql":
            # One short statement with an array per column: a multi-row VALUES of 500 rows is a
            # 4,000-placeholder query that psycopg re-parses on every call. The envelopes go as one
            # JSON array (a text[] would be escaped quote by quote), serialised once, or not at all
            # when the caller kept the text it received.
            envelopes = ",".join(e.text if e.text is not None else _json(e.raw) for e in envs)
            result = await conn.execute(_PG_INSERT_RESULTS, {
                "ids": [e.id for e in envs], "probes": [e.probe for e in envs],
                "agents": [str(e.agent["id"]) for e in envs], "targets": [str(e.target["id"]) for e in envs],
                "starts": [e.started_at for e in envs], "statuses": [e.status for e in envs],
                "envelopes": f"[{envelopes}]", "now": now})
            return {row[0] for row in result}
        # SQLite: the ids already stored, then sqlite3's executemany of the others (the write lock is
        # held since BEGIN IMMEDIATE, so none can appear in between); values as SQLAlchemy stores them.
        ids = orjson.dumps([e.id for e in envs]).decode()
        known = {r[0] for r in await conn.exec_driver_sql(_SQLITE_KNOWN_RESULTS, (ids,))}
        stamp = _stamp(conn)
        stored = stamp(now)
        rows = [(e.id, e.probe, str(e.agent["id"]), str(e.target["id"]), stamp(e.started_at), e.status,
                 _sqlite_json(e), stored) for e in envs if e.id not in known]
        if rows:
            await conn.exec_driver_sql(_SQLITE_INSERT_RESULTS, rows)
        return {r[0] for r in rows}

    async def _pg_copy_results(self, conn: AsyncConnection, envs: Sequence[Envelope], now: datetime
                               ) -> set[str]:
        """_insert_results for a bulk write: the ids not stored yet go in by COPY (in id order, as the
        statements insert them); if another writer stored one meanwhile, the statements decide."""
        ids = orjson.dumps([e.id for e in envs]).decode()
        known = {row[0] for row in await conn.execute(_PG_KNOWN_RESULTS, {"ids": ids})}
        stored = now.isoformat()
        rows = [e for e in envs if e.id not in known]
        data = "".join([
            f"{_copy_text(e.id)}\t{_copy_text(e.probe)}\t{_copy_text(str(e.agent['id']))}\t"
            f"{_copy_text(str(e.target['id']))}\t{e.started_at.isoformat()}\t{_copy_text(e.status)}\t"
            f"{_copy_text(e.text if e.text is not None else _json(e.raw))}\t{stored}\n" for e in rows])
        if not data:
            return set()
        try:
            await conn.copy_in(_PG_COPY_RESULTS, data)
        except IntegrityError:
            return await self._insert_results(conn, envs, now)
        return {e.id for e in rows}

    async def _apply_rollups(self, conn: AsyncConnection, deltas: Mapping[HourKey, Delta],
                             now: datetime, *, bulk: bool = False) -> None:
        """Merge deltas into their hour rows under a row lock, so concurrent writers lose nothing.

        A row that does not exist yet is inserted as the delta itself (one multi-row statement), with
        no row to read and merge into: in a backfill or a bulk import nearly every round opens one.
        The rest are then locked, read, merged and updated."""
        if not deltas:
            return
        keys = sorted(deltas)
        if self.dialect == "postgresql":
            await self._pg_apply_rollups(conn, keys, deltas, now, bulk)
        else:
            await self._sqlite_apply_rollups(conn, keys, deltas, now)

    async def _pg_apply_rollups(self, conn: AsyncConnection, keys: Sequence[HourKey],
                                deltas: Mapping[HourKey, Delta], now: datetime, bulk: bool = False) -> None:
        text_rows: str | None = None
        copied: list[HourKey] | None = None
        if all(_finite(deltas[k]) for k in keys):
            with contextlib.suppress(orjson.JSONEncodeError):        # an integer past 64 bits
                if bulk:
                    copied = await self._pg_copy_hours(conn, keys, deltas, now)
                else:
                    text_rows = orjson.dumps([_hour_row(k, deltas[k], now) for k in keys]).decode()
        if copied is not None:
            rest = copied
        elif text_rows is not None:
            # Inserted in key order, as writers lock rows: a row another writer inserted and has
            # not committed yet makes this one wait, then conflict and merge below.
            there = await conn.execute(_PG_INSERT_HOURS, {"rows": text_rows})
            rest = [keys[n - 1] for (n,) in there]
        else:
            # Absurd figures (inf, past 64 bits): every row created empty and merged through
            # executemany, whose errors stay what they were.
            empty = Rollup().to_row()
            created_rows = [{"agent_id": a, "target_id": t, "probe": p, "hour": h, **empty, "updated_at": now}
                            for a, t, p, h in keys]
            await conn.execute(_PG_INSERT_HOURS, {"rows": orjson.dumps(created_rows).decode()})
            rest = list(keys)
        if not rest:
            return
        wanted = [{"agent_id": a, "target_id": t, "probe": p, "hour": h} for a, t, p, h in rest]
        current = {(r["agent_id"], r["target_id"], r["probe"], r["hour"]): r for r in
                   (await conn.execute(_PG_LOCK_HOURS, {"rows": orjson.dumps(wanted).decode()})).mappings()}
        merged_rows = [_hour_row(k, _merged(current[k], deltas[k]), now) for k in rest]
        if _jsonable(merged_rows):
            await conn.execute(_PG_UPDATE_HOURS, {"rows": orjson.dumps(merged_rows).decode()})
            return
        updates = [{"k_agent": r.pop("agent_id"), "k_target": r.pop("target_id"), "k_probe": r.pop("probe"),
                    "k_hour": r.pop("hour"), **r} for r in merged_rows]
        stmt = (update(rollups_hourly)
                .where(_R.agent_id == bindparam("k_agent"), _R.target_id == bindparam("k_target"),
                       _R.probe == bindparam("k_probe"), _R.hour == bindparam("k_hour", type_=_R.hour.type))
                .values({c: bindparam(c) for c in (*_ROLLUP_VALUES, "updated_at")}))
        await conn.execute(stmt, updates)

    async def _pg_copy_hours(self, conn: AsyncConnection, keys: Sequence[HourKey],
                             deltas: Mapping[HourKey, Delta], now: datetime) -> list[HourKey]:
        """A bulk write's new hour rows, by COPY in key order; returns the keys whose rows were there
        already, to be merged into. Raises orjson.JSONEncodeError for an integer past 64 bits, as the
        statements' path does. If another writer inserted one of the new rows meanwhile, they take
        the statements' path (_PG_INSERT_HOURS), which says which ones."""
        wanted = orjson.dumps([{"agent_id": a, "target_id": t, "probe": p, "hour": h} for a, t, p, h in keys])
        there = {n for (n,) in await conn.execute(_PG_KNOWN_HOURS, {"rows": wanted.decode()})}
        new = [k for n, k in enumerate(keys, 1) if n not in there]
        updated = now.isoformat()
        hours = {h: h.isoformat() for h in {k[3] for k in new}}
        lines = [_hour_line(k, deltas[k], hours[k[3]], updated) for k in new]
        if None in lines:
            raise orjson.JSONEncodeError("Integer exceeds 64-bit range")
        data = "".join([line for line in lines if line is not None])
        if data:
            try:
                await conn.copy_in(_PG_COPY_HOURS, data)
            except IntegrityError:
                text_rows = orjson.dumps([_hour_row(k, deltas[k], now) for k in new]).decode()
                also = {new[n - 1] for (n,) in await conn.execute(_PG_INSERT_HOURS, {"rows": text_rows})}
                return [k for n, k in enumerate(keys, 1) if n in there or k in also]
        return [k for n, k in enumerate(keys, 1) if n in there]

    async def _sqlite_apply_rollups(self, conn: AsyncConnection, keys: Sequence[HourKey],
                                    deltas: Mapping[HourKey, Delta], now: datetime) -> None:
        """The write transaction holds SQLite's write lock (BEGIN IMMEDIATE): the rows read are the rows
        there are until commit. Statements go to sqlite3's executemany as they are (values in the
        column types' stored form): SQLAlchemy's per-row parameter processing cost more than SQLite."""
        stamp = _stamp(conn)
        hours = [stamp(h) for *_, h in keys]
        wanted = orjson.dumps([(*k[:3], h) for k, h in zip(keys, hours, strict=True)]).decode()
        stored = await conn.exec_driver_sql(_SQLITE_READ_HOURS, (wanted,))
        current: dict[HourKey, dict[str, Any]] = {
            keys[r[0]]: dict(zip(_ROLLUP_VALUES, r[1:], strict=True)) for r in stored}
        updated = stamp(now)
        if len(current) < len(keys):
            await conn.exec_driver_sql(_SQLITE_INSERT_HOURS, [
                (*k[:3], h, *_hour_values(deltas[k]), updated)
                for k, h in zip(keys, hours, strict=True) if k not in current])
        if current:
            await conn.exec_driver_sql(_SQLITE_UPDATE_HOURS, [
                (*_hour_values(_merged(row, deltas[k])), updated, *k[:3], h)
                for k, h in zip(keys, hours, strict=True) if (row := current.get(k)) is not None])

    async def _horizon(self, conn: AsyncConnection) -> datetime | None:
        value = (await conn.execute(_READ_HORIZON)).scalar()
        return datetime.fromisoformat(value) if value else None

    async def enforce_retention(self, raw_days: float = DEFAULT_RAW_RETENTION_DAYS,
                                now: datetime | None = None) -> int:
        """Delete raw rounds older than `raw_days`; hourly rollups are kept. Returns rows deleted."""
        if not raw_days > 0:
            raise ValueError(f"raw_days must be positive, got {raw_days}")
        cutoff = _aware(now, "now") if now is not None else utc_now()
        cutoff -= timedelta(days=raw_days)
        async with self._write("enforcing retention on") as conn:
            deleted = await conn.execute(delete(probe_results).where(probe_results.c.started_at < cutoff))
            old = await self._horizon(conn)
            if old is None or cutoff > old:
                await prefix_sql.set_meta(conn, self.dialect, _HORIZON, cutoff.isoformat())
            return int(deleted.rowcount)

    async def fold_rollups(self, now: datetime | None = None, *, chunk: int = 50) -> prefix_sql.FoldStats:
        """Fold the hours that are over into the prefix rollups (netprobe.store.prefix); a transaction
        per `chunk` series, so a first fold of a large database does not hold writers up."""
        now = _aware(now, "now") if now is not None else utc_now()
        stats = prefix_sql.FoldStats()
        async with self._read("planning the rollup fold of") as conn:
            series, marker = await prefix_sql.fold_plan(conn)
        for i in range(0, len(series), chunk):
            async with self._write("folding rollups in") as conn:
                await prefix_sql.fold(conn, self.dialect, series[i:i + chunk], now, stats)
        async with self._write("folding rollups in") as conn:
            await prefix_sql.fold_done(conn, self.dialect, marker, stats)
        return stats

    async def clear_prefix(self) -> None:
        async with self._write("clearing the prefix rollups of") as conn:
            await prefix_sql.clear(conn)

    # -- reading ----------------------------------------------------------------------------------
    async def ping(self) -> None:
        """A round trip to the database (a health check); StorageError when it does not answer."""
        async with self._read("checking") as conn:
            await conn.execute(_PING)

    async def results(self, agent_id: str | None = None, target_id: str | None = None,
                      probe: str | None = None, start: datetime | None = None, end: datetime | None = None,
                      limit: int | None = None) -> list[ResultRow]:
        """Stored rounds, oldest first."""
        c = probe_results.c
        q: Select[Any] = select(*_RESULT_COLUMNS)
        for col, value in ((c.agent_id, agent_id), (c.target_id, target_id), (c.probe, probe)):
            if value is not None:
                q = q.where(col == value)
        if start is not None:
            q = q.where(c.started_at >= _aware(start, "start"))
        if end is not None:
            q = q.where(c.started_at < _aware(end, "end"))
        q = q.order_by(c.started_at, c.id).limit(limit)
        async with self._read("reading results from") as conn:
            rows = (await conn.execute(q)).all()
        # stored rounds were validated when they came in (or are this agent's own): not again
        return [ResultRow(i, p, a, t, s, st, stored_envelope(e)) for i, p, a, t, s, st, e in rows]

    # -- transactions -----------------------------------------------------------------------------
    @asynccontextmanager
    async def _write(self, doing: str) -> AsyncIterator[AsyncConnection]:
        try:
            async with (self._write_lock or contextlib.nullcontext()), mapped_errors(self._url, doing), \
                    self._engine.begin() as conn:
                yield conn
        except migrate.MigrationError as exc:
            raise StorageError(f"{doing} {self.url} failed: {exc}") from exc

    @asynccontextmanager
    async def reading(self, doing: str) -> AsyncIterator[reads.Conn]:
        """A connection for the plain SQL of netprobe.store.reads (the reports' statements)."""
        async with self._read(doing) as conn:
            yield _DriverConn(conn, self.dialect)

    @asynccontextmanager
    async def _read(self, doing: str) -> AsyncIterator[AsyncConnection]:
        async with mapped_errors(self._url, doing), self._engine.connect() as conn:
            await conn.execution_options(**READ_ONLY)
            yield conn


class _DriverConn:
    """netprobe.store.reads' statements on one of the Store's connections, as the driver runs them."""

    __slots__ = ("_conn", "_dialect")

    def __init__(self, conn: AsyncConnection, dialect: str) -> None:
        self._conn, self._dialect = conn, dialect

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[reads.Row]:
        text_, args = reads.prepare(self._dialect, sql, params)
        result = await self._conn.exec_driver_sql(text_, args)
        return [tuple(r) for r in result] if result.returns_rows else []


async def open_store(url: str | None = None, *, upgrade: bool = True,
                     sqlite_cache_kib: int | None = None) -> Store:
    """Open (creating a SQLite file and its directory if needed) and migrate to the latest revision.

    `url` None means the default SQLite database under state_dir(). `sqlite_cache_kib`: the page cache
    of each SQLite connection, when not SQLite's default (2,000 KiB).
    """
    target = normalise_url(url or default_db_url())
    store = Store(create_engine(target, sqlite_cache_kib=sqlite_cache_kib), target)
    if upgrade:
        try:
            await store.upgrade()
        except BaseException:
            await store.close()
            raise
    return store
