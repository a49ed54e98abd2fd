"""Plain SQL for the reports' read path, on psycopg (PostgreSQL) or sqlite3 directly, without SQLAlchemy.

`netprobe report peak` and `budget` only read, and what they read is a few statements per agent
(netprobe.store.fleet, netprobe.store.prefix_read). Importing SQLAlchemy (Core, the engine, a dialect)
was most of a report's start-up (see bench/README.md, report_scale), for statements that are plain
text anyway. So those statements are written once here in plain SQL and run on one of two sources:

- Reader: its own connections, psycopg's or sqlite3's on a thread; opened by open_reader only when the
  database is at the scripts' head revision (so nothing needs migrating);
- Store.reading(): the same statements on the Store's SQLAlchemy connection (exec_driver_sql), for
  every other caller and for a database open_reader declines (missing, not migrated yet).

SQL is written with %(name)s parameters (psycopg's style; prepare() writes sqlite3's :name); a list
or tuple value becomes a parenthesised list (`IN %(ids)s`), a list of tuples rows of values
(`(a, b) IN %(keys)s`): on PostgreSQL one array per column, unnested, on SQLite a VALUES list, with
columns named as VALUES names them. Timestamps go in and come out as SQLAlchemy's UTCDateTime has
them: aware UTC datetimes in Python, naive UTC text on SQLite; JSON columns come out decoded.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from netprobe.errors import StorageError

if TYPE_CHECKING:
    import psycopg

Row = tuple[Any, ...]
_PARAM = re.compile(r"%%|%\((\w+)\)s")
_SQLITE_BUSY_S = 30.0           # as netprobe.store.engine.BUSY_TIMEOUT_MS
_PG_CONNECT_TIMEOUT_S = 10      # as netprobe.store.engine.create_engine


class Conn(Protocol):
    """One connection of a source, checked out for a few statements."""

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...


class Source(Protocol):
    """What the reports read from: a Reader, or a Store (netprobe.store.store)."""

    @property
    def dialect(self) -> str: ...

    @property
    def parallel_reads(self) -> int: ...

    def reading(self, doing: str) -> AbstractAsyncContextManager[Conn]: ...

    async def close(self) -> None: ...


def utc(value: Any) -> datetime:
    """A timestamp column's value as an aware UTC datetime (SQLite: naive UTC text)."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    assert isinstance(value, datetime), value
    if value.tzinfo is UTC:          # the Reader's sessions are in UTC: as it is (a report reads thousands)
        return value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _stored(value: Any, dialect: str) -> Any:
    """A parameter as the column holds it: on SQLite a datetime is naive UTC text with microseconds
    (SQLAlchemy's storage format for DateTime there)."""
    if isinstance(value, datetime) and dialect == "sqlite":
        ts = value.astimezone(UTC) if value.tzinfo is not None else value
        return ts.replace(tzinfo=None).isoformat(" ", "microseconds")
    return value


def prepare(dialect: str, sql: str, params: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The statement in the driver's style, lists expanded: psycopg's %(name)s ("postgresql") or
    sqlite3's :name ("sqlite")."""
    out: dict[str, Any] = {}
    sqlite = dialect == "sqlite"

    def place(name: str, value: Any, cast: str = "") -> str:
        """The marker of one value; `cast`, an array's type in SQL: psycopg sends a cast value in binary
        (%(x)b): as text it tests each array item for quoting with a regex."""
        out[name] = _stored(value, dialect)
        return f":{name}" if sqlite else f"%({name}){'b' if cast else 's'}{cast}"

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:                            # a literal %, as psycopg writes it
            return "%%"
        value = (params or {})[name]
        if not isinstance(value, list | tuple):
            return place(name, value)
        if not value:
            raise ValueError(f"empty list for {name}")
        if isinstance(value[0], tuple):
            if not sqlite:
                return _unnest(name, value, place)
            rows = [f"({', '.join(place(f'{name}_{i}_{j}', v) for j, v in enumerate(row))})"
                    for i, row in enumerate(value)]
            return f"(VALUES {', '.join(rows)})"
        return f"({', '.join(place(f'{name}_{i}', v) for i, v in enumerate(value))})"

    return _PARAM.sub(sub, sql), out


_ARRAY_TYPES: tuple[tuple[type, str], ...] = ((bool, "boolean[]"), (int, "bigint[]"), (float, "float8[]"),
                                            (str, "text[]"), (datetime, "timestamptz[]"), (bytes, "bytea[]"))


def _column_types(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """Each column's array type, from its first value that is not None (text when all are)."""
    types = []
    for j in range(len(rows[0])):
        sample = next((row[j] for row in rows if row[j] is not None), "")
        types.append(next(t for cls, t in _ARRAY_TYPES if isinstance(sample, cls)))
    return types


def _unnest(name: str, rows: Sequence[tuple[Any, ...]], place: Callable[[str, Any, str], str]) -> str:
    """Rows of values on PostgreSQL: one array parameter per column, unnested into columns named as
    VALUES names them (column1, …). A VALUES list of a fleet report's 2,000 parameters cost psycopg
    more to convert to $n placeholders than the statement's own rows."""
    cols = [place(f"{name}_{j}", [row[j] for row in rows], f"::{kind}")
            for j, kind in enumerate(_column_types(rows))]
    names = ", ".join(f"column{j + 1}" for j in range(len(cols)))
    return f"(SELECT * FROM unnest({', '.join(cols)}) AS {name}({names}))"


# -- a source of its own connections --------------------------------------------------------------
class _PgConn:
    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.AsyncConnection[Row]) -> None:
        self._conn = conn

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        text, args = prepare("postgresql", sql, params)
        # results in binary: bytea and numbers without their text form's parsing
        cursor = await self._conn.execute(text, args, binary=True)
        return await cursor.fetchall() if cursor.description is not None else []


class _SqliteConn:
    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _run(self, sql: str, args: dict[str, Any]) -> list[Row]:
        return self._conn.execute(sql, args).fetchall()

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        text, args = prepare("sqlite", sql, params)
        # on a thread: SQLite works without the GIL, so a read ahead overlaps with this process's work
        return await asyncio.to_thread(self._run, text, args)


class Reader:
    """Connections of its own to one database, for reading only (open_reader)."""

    def __init__(self, url: str, dialect: str, target: str) -> None:
        self._url = url                  # as the user gave it, for messages
        self._dialect = dialect
        self._target = target            # libpq conninfo (PostgreSQL) or the file (SQLite)
        self._idle: list[_PgConn | _SqliteConn] = []
        self._open: list[Any] = []

    @property
    def dialect(self) -> str:
        return self._dialect

    @property
    def parallel_reads(self) -> int:
        return 2        # as Store.parallel_reads for a file or a server

    async def _connect(self) -> _PgConn | _SqliteConn:
        if self._dialect == "postgresql":
            import orjson
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
            from psycopg.types.json import set_json_loads

            given = conninfo_to_dict(self._target)
            # UTC sessions: timestamps come back in datetime.UTC itself (see utc()); no prepared
            # statements: they break behind PgBouncer's transaction pooling, and a report runs each
            # statement a few times at most
            pg = await psycopg.AsyncConnection.connect(
                self._target, autocommit=True, prepare_threshold=None,
                connect_timeout=given.get("connect_timeout", _PG_CONNECT_TIMEOUT_S),
                options=f"{given.get('options', '')} -c TimeZone=UTC".strip())
            self._open.append(pg)
            set_json_loads(orjson.loads, pg)
            return _PgConn(pg)

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(self._target, timeout=_SQLITE_BUSY_S, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(_SQLITE_BUSY_S * 1000)}")
            return conn

        lite = await asyncio.to_thread(connect)
        self._open.append(lite)
        return _SqliteConn(lite)

    @asynccontextmanager
    async def reading(self, doing: str) -> AsyncIterator[Conn]:
        """A connection for a few statements; on SQLite in one read transaction (one snapshot), as
        Store._read has them; PostgreSQL's run in autocommit (read committed either way)."""
        try:
            conn = self._idle.pop() if self._idle else await self._connect()
        except Exception as exc:
            raise self._error(exc, doing) from exc
        try:
            if isinstance(conn, _SqliteConn):
                await conn.fetch("BEGIN")
            try:
                yield conn
            finally:
                if isinstance(conn, _SqliteConn):
                    await conn.fetch("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc, doing) from exc
        except Exception as exc:
            if _is_driver_error(exc):
                raise self._error(exc, doing) from exc
            raise
        self._idle.append(conn)

    def _error(self, exc: BaseException, doing: str) -> StorageError:
        from netprobe.store.urls import display_url  # SQLAlchemy's URL: only on the way out

        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = " ".join(lines[:2]) if lines else type(exc).__name__
        return StorageError(f"{doing} {display_url(self._url)} failed: {detail[:300]}")

    async def close(self) -> None:
        opened, self._open, self._idle = self._open, [], []
        for conn in opened:
            if isinstance(conn, sqlite3.Connection):
                conn.close()
            else:
                await conn.close()


def _is_driver_error(exc: BaseException) -> bool:
    import sys

    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9]*)(?:\+[A-Za-z0-9_]+)?://(?P<rest>.*)$", re.S)


def _target(url: str) -> tuple[str, str] | None:
    """(dialect, libpq conninfo or SQLite file) of the URLs this reads as SQLAlchemy does, None for
    any other (in-memory SQLite, query options on SQLite, other backends): those go the Store's way."""
    m = _URL.match(url.strip())
    if m is None:
        return None
    scheme, rest = m["scheme"].lower(), m["rest"]
    if scheme in ("postgresql", "postgres"):
        return "postgresql", f"postgresql://{rest}"
    if scheme == "sqlite" and rest.startswith("/") and "?" not in rest and len(rest) > 1:
        path = rest[1:]
        if path in ("", ":memory:") or path.startswith("file:"):
            return None
        return "sqlite", path
    return None


async def open_reader(url: str | None) -> Reader | None:
    """A Reader on `url` (None: the agent's default SQLite file) when it is an existing database at the
    migration scripts' head; None otherwise (open it with open_store, which creates and migrates, and
    says what is wrong with it)."""
    from netprobe.store.migrate import HAS_VERSION_TABLE, READ_VERSION, script_head
    from netprobe.store.urls import default_db_url

    text = url or default_db_url()
    found = _target(text)
    head = script_head()
    if found is None or head is None:
        return None
    dialect, target = found
    if dialect == "sqlite" and not await asyncio.to_thread(os.path.isfile, target):
        return None
    reader = Reader(text, dialect, target)
    try:
        async with reader.reading("reading the schema revision of") as conn:
            has = await conn.fetch(HAS_VERSION_TABLE[dialect])
            rows = await conn.fetch(READ_VERSION) if has[0][0] else []
    except StorageError:
        await reader.close()
        return None
    if len(rows) != 1 or rows[0][0] != head:
        await reader.close()
        return None
    return reader


__all__ = ["Conn", "Reader", "Row", "Source", "open_reader", "prepare", "utc"]
