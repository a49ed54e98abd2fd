"""Async engine creation (SQLite pragmas, write locking) and driver errors → StorageError.

AsyncEngine and AsyncConnection here are the part of sqlalchemy.ext.asyncio's that netprobe uses, the
same way: each call runs the sync Core call in a greenlet (greenlet_spawn) over the async driver.
Why not sqlalchemy.ext.asyncio itself: its package imports the ORM (AsyncSession), 41 more modules and
6 MB the agent would keep for good without ever using them (bench/agent_footprint.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, TypeVarTuple, overload

from sqlalchemy import Table, event
from sqlalchemy import create_engine as _sync_engine
from sqlalchemy.engine import URL, Connection, CursorResult, Dialect, Engine
from sqlalchemy.exc import DataError, DBAPIError, InvalidRequestError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql import Executable
from sqlalchemy.util.concurrency import greenlet_spawn
from sqlalchemy.util.typing import TupleAny

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import _DBAPIAnyExecuteParams
    from sqlalchemy.sql.selectable import TypedReturnsRows

from netprobe.errors import RefusedValueError, StorageError
from netprobe.store.urls import display_url, sqlite_path

BUSY_TIMEOUT_MS = 30_000
# read-only transactions set this so SQLite does not take the write lock for them
READ_ONLY = {"netprobe_read_only": True}


_T = TypeVar("_T")
_P = ParamSpec("_P")
_Ts = TypeVarTuple("_Ts")
Params = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


async def _to_completion(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a cleanup (close, commit/rollback on exit) to its end even if the caller is cancelled
    meanwhile, re-raising the cancellation after: as sqlalchemy.ext.asyncio does, so a connection is
    never handed back to the pool half-closed or after the engine was disposed."""
    task = asyncio.create_task(coro)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError as err:
            if task.done():
                raise
            cancelled = err
        else:
            break
    if cancelled is not None:
        raise cancelled
    return result


class AsyncConnection:
    """One pooled connection; `async with engine.connect()` / `engine.begin()` hand these out."""

    __slots__ = ("_sync",)

    def __init__(self, sync: Connection) -> None:
        self._sync = sync

    @property
    def sync_connection(self) -> Connection:
        return self._sync

    @property
    def dialect(self) -> Dialect:
        return self._sync.dialect

    @overload
    async def execute(self, statement: TypedReturnsRows[*_Ts],
                      parameters: Params = None) -> CursorResult[*_Ts]: ...

    @overload
    async def execute(self, statement: Executable, parameters: Params = None
                      ) -> CursorResult[*TupleAny]: ...

    async def execute(self, statement: Executable, parameters: Params = None
                      ) -> CursorResult[*TupleAny]:
        """The statement's result, rows already fetched (the async drivers buffer them)."""
        result: CursorResult[*TupleAny] = await greenlet_spawn(
            self._sync.execute, statement, parameters, _require_await=True)
        return result

    async def exec_driver_sql(self, statement: str, parameters: _DBAPIAnyExecuteParams | None = None
                              ) -> CursorResult[*TupleAny]:
        result: CursorResult[*TupleAny] = await greenlet_spawn(
            self._sync.exec_driver_sql, statement, parameters, _require_await=True)
        return result

    async def copy_in(self, statement: str, data: str) -> None:
        """PostgreSQL: `COPY … FROM STDIN` of `data` (COPY's text format) on this connection, in its
        transaction, under a savepoint: a failed COPY leaves the transaction as it was and raises
        what SQLAlchemy would have raised for the driver's error (IntegrityError for a duplicate key)."""
        import psycopg  # only PostgreSQL connections get here

        driver = await greenlet_spawn(lambda: self._sync.connection.driver_connection)
        assert isinstance(driver, psycopg.AsyncConnection), driver
        # By hand, not driver.transaction(): that one commits when no transaction is open yet.
        try:
            async with driver.cursor() as cursor:
                await cursor.execute("SAVEPOINT netprobe_copy")
                try:
                    async with cursor.copy(statement) as copy:
                        await copy.write(data)
                except psycopg.Error:
                    await cursor.execute("ROLLBACK TO SAVEPOINT netprobe_copy")
                    raise
                finally:
                    await cursor.execute("RELEASE SAVEPOINT netprobe_copy")
        except psycopg.Error as exc:
            raise DBAPIError.instance(statement, None, exc, psycopg.Error, dialect=self.dialect) from exc

    async def execution_options(self, **options: Any) -> AsyncConnection:
        await greenlet_spawn(self._sync.execution_options, **options)
        return self

    async def run_sync(self, fn: Callable[Concatenate[Connection, _P], _T], *args: _P.args,
                       **kwargs: _P.kwargs) -> _T:
        """fn(sync Connection, …) in a greenlet: sync SQLAlchemy code (Alembic) over this connection."""
        return await greenlet_spawn(fn, self._sync, *args, _require_await=False, **kwargs)


class AsyncEngine:
    """A sync Core Engine on an async driver (aiosqlite, psycopg's async connections)."""

    __slots__ = ("sync_engine",)

    def __init__(self, sync_engine: Engine) -> None:
        if not sync_engine.dialect.is_async:
            raise InvalidRequestError(f"{sync_engine.dialect.driver!r} is not an async driver")
        self.sync_engine = sync_engine

    @property
    def dialect(self) -> Dialect:
        return self.sync_engine.dialect

    @property
    def url(self) -> URL:
        return self.sync_engine.url

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        sync = await greenlet_spawn(self.sync_engine.connect)
        try:
            yield AsyncConnection(sync)
        finally:
            await _to_completion(greenlet_spawn(sync.close))

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction: committed when the block ends, rolled back if it raises."""
        async with self.connect() as conn:
            trans = await greenlet_spawn(conn.sync_connection.begin)
            trans.__enter__()
            try:
                yield conn
            except BaseException as exc:
                await greenlet_spawn(trans.__exit__, type(exc), exc, exc.__traceback__)
                raise
            await greenlet_spawn(trans.__exit__, None, None, None)

    async def dispose(self) -> None:
        await greenlet_spawn(self.sync_engine.dispose)


def upsert(dialect: str, table: Table) -> Any:
    """The dialect's INSERT, which has on_conflict_do_update; PostgreSQL's is imported only when used
    (the SQLite agent never loads SQLAlchemy's PostgreSQL dialects)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def create_async_engine(url: URL, **kwargs: Any) -> AsyncEngine:
    return AsyncEngine(_sync_engine(url, _is_async=True, **kwargs))


def create_engine(url: URL) -> AsyncEngine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    # without a connect timeout an unreachable server hangs the agent/CLI for minutes
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": 10}
    return create_async_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5,
                               connect_args=connect_args)


def _sqlite_engine(url: URL) -> AsyncEngine:
    path = sqlite_path(url)
    kwargs: dict[str, Any] = {"connect_args": {"timeout": BUSY_TIMEOUT_MS / 1000}}
    if path is None:
        kwargs["poolclass"] = StaticPool       # one shared in-memory database
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the directory for {path}: {exc.strerror or exc}") from None
    engine = create_async_engine(url, **kwargs)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # take over BEGIN ourselves (below); the driver's implicit BEGIN cannot be made IMMEDIATE
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", f"busy_timeout={BUSY_TIMEOUT_MS}", "foreign_keys=ON",
                       "synchronous=NORMAL"):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers lock up front: a deferred transaction that reads then writes fails with
        # "database is locked" instead of waiting when another writer got there first.
        read_only = conn.get_execution_options().get("netprobe_read_only", False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def storage_error(exc: BaseException, url: URL | str, doing: str) -> StorageError:
    """A one-line, password-free message for what the driver said."""
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = str(orig).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("[SQL")]
    detail = " ".join(lines[:2]) if lines else type(orig).__name__
    if len(detail) > 300:
        detail = detail[:297] + "..."
    message = f"{doing} {display_url(url)} failed: {detail}"
    if isinstance(exc, DataError):
        first = next((ln.strip() for ln in str(orig).splitlines() if ln.strip()), type(orig).__name__)
        return RefusedValueError(message, first)
    return StorageError(message)


@asynccontextmanager
async def mapped_errors(url: URL | str, doing: str) -> AsyncIterator[None]:
    """Turn SQLAlchemy/driver/OS errors raised inside into StorageError."""
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        raise storage_error(exc, url, doing) from exc
