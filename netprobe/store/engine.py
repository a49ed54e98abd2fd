"""Async engine creation (SQLite pragmas, write locking) and driver errors → StorageError.

AsyncEngine and AsyncConnection here are the part of sqlalchemy.ext.asyncio's that netprobe uses.
On PostgreSQL they work the same way: each call runs the sync Core call in a greenlet (greenlet_spawn)
over the async driver (psycopg). Why not sqlalchemy.ext.asyncio itself: its package imports the ORM
(AsyncSession), 41 more modules the agent would keep for good without ever using them
(see bench/README.md, agent_footprint).

SQLite (ThreadedEngine) has no async driver underneath: SQLAlchemy's sync Core runs over the standard
sqlite3 module, each checked-out connection's calls on a worker thread it has meanwhile, one hop to
that thread per call (a statement, connect + BEGIN, COMMIT + close) rather than one per cursor step.
The rows of a statement are fetched on the worker (_BufferedCursor), so the result is read in the
event loop without touching SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import queue
import sqlite3
import threading
from collections import deque
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

    __slots__ = ("_engine", "_sync")

    def __init__(self, sync: Connection, engine: AsyncEngine | _Worker) -> None:
        self._sync = sync
        self._engine = engine       # what runs its calls: the engine (greenlets) or a SQLite worker

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
        result: CursorResult[*TupleAny] = await self._engine.call_statement(
            self._sync.execute, statement, parameters)
        return result

    async def exec_driver_sql(self, statement: str, parameters: _DBAPIAnyExecuteParams | None = None
                              ) -> CursorResult[*TupleAny]:
        result: CursorResult[*TupleAny] = await self._engine.call_statement(
            self._sync.exec_driver_sql, statement, parameters)
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
        await self._engine.call_local(self._sync.execution_options, **options)
        return self

    async def run_sync(self, fn: Callable[Concatenate[Connection, _P], _T], *args: _P.args,
                       **kwargs: _P.kwargs) -> _T:
        """fn(sync Connection, …) where the driver runs (a greenlet, SQLite's worker thread): sync
        SQLAlchemy code (Alembic) over this connection."""
        return await self._engine.call_sync(fn, self._sync, *args, **kwargs)


class AsyncEngine:
    """A sync Core Engine on an async driver (psycopg's async connections)."""

    __slots__ = ("sync_engine",)

    def __init__(self, sync_engine: Engine) -> None:
        if not sync_engine.dialect.is_async:
            raise InvalidRequestError(f"{sync_engine.dialect.driver!r} is not an async driver")
        self.sync_engine = sync_engine

    async def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """A sync Core call (connect, begin, close, dispose)."""
        return await greenlet_spawn(fn, *args, **kwargs)

    async def call_statement(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """A sync Core call that runs a statement: with an async driver, it must have awaited it."""
        return await greenlet_spawn(fn, *args, _require_await=True, **kwargs)

    async def call_sync(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Sync code that may or may not talk to the database (run_sync)."""
        return await greenlet_spawn(fn, *args, _require_await=False, **kwargs)

    call_local = call_sync      # sets state on the connection without talking to the database (options)

    @property
    def dialect(self) -> Dialect:
        return self.sync_engine.dialect

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        sync = await self.call(self.sync_engine.connect)
        try:
            yield AsyncConnection(sync, self)
        finally:
            await _to_completion(self.call(sync.close))

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction: committed when the block ends, rolled back if it raises."""
        async with self.connect() as conn:
            trans = await self.call(conn._sync.begin)
            trans.__enter__()
            try:
                yield conn
            except BaseException as exc:
                await self.call(trans.__exit__, type(exc), exc, exc.__traceback__)
                raise
            await self.call(trans.__exit__, None, None, None)

    async def dispose(self) -> None:
        await self.call(self.sync_engine.dispose)


class _BufferedCursor(sqlite3.Cursor):
    """Fetches a statement's rows where it runs (the engine's worker thread), so the result is read
    in the event loop from this buffer, as from an async driver's cursor, without touching SQLite."""

    _rows: deque[Any]

    def execute(self, sql: str, parameters: Any = (), /) -> _BufferedCursor:
        super().execute(sql, parameters)
        self._rows = deque(super().fetchall()) if self.description is not None else deque()
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> _BufferedCursor:
        super().executemany(sql, seq_of_parameters)
        self._rows = deque()
        return self

    def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        n = self.arraysize if size is None else size
        return [self._rows.popleft() for _ in range(min(n, len(self._rows)))]

    def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    def close(self) -> None:
        # the statement was run to its end (and so reset) in execute(); nothing of SQLite's is held
        self._rows = deque()


class _BufferedConnection(sqlite3.Connection):
    def cursor(self, factory: Any = _BufferedCursor) -> Any:
        return super().cursor(factory)


class _Worker:
    """A thread running calls in order: the calls of one checked-out connection (ThreadedEngine).

    A connection of its own per thread: a statement waiting in SQLite's busy handler
    (another connection of this process holds the write lock) blocks its own thread, not the calls
    of the connection that holds the lock and would release it."""

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any],
                                            Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="netprobe-sqlite", daemon=True).start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, fut, fn, args = job
            del job
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting task
                _settle(loop, fut, None, exc)
            else:
                _settle(loop, fut, result, None)
            del loop, fut, fn, args

    def stop(self) -> None:
        self._jobs.put(None)

    async def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((loop, fut, functools.partial(fn, **kwargs) if kwargs else fn, args))
        return await fut

    call_statement = call
    call_sync = call

    async def call_local(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        # no hop: the connection is idle (each call on it is awaited before the next)
        return fn(*args, **kwargs)


def _settle(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], result: Any,
            exc: BaseException | None) -> None:
    def settle() -> None:
        if fut.cancelled():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody awaits this any more
        pass


class ThreadedEngine(AsyncEngine):
    """A sync Core Engine on the sqlite3 module. A connection's calls run on a worker thread it has
    while it is checked out (_Worker); idle workers are kept for the next connection."""

    __slots__ = ("_idle",)

    IDLE_WORKERS = 2

    def __init__(self, sync_engine: Engine) -> None:
        self.sync_engine = sync_engine
        self._idle: list[_Worker] = []

    def _take(self) -> _Worker:
        return self._idle.pop() if self._idle else _Worker()

    def _give(self, worker: _Worker) -> None:
        if len(self._idle) < self.IDLE_WORKERS:
            self._idle.append(worker)
        else:
            worker.stop()

    async def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        worker = self._take()
        try:
            return await _to_completion(worker.call(fn, *args, **kwargs))
        finally:
            self._give(worker)

    call_statement = call
    call_sync = call
    call_local = _Worker.call_local     # no hop, as on the worker itself

    async def _open(self, worker: _Worker, fn: Callable[[Engine], _T]) -> _T:
        """fn(engine) on `worker`: a connection checked out (and maybe begun). Cancelled meanwhile,
        the connection is closed once the worker has opened it, and the cancellation goes on."""
        opened: list[Any] = []

        def open_() -> _T:
            value = fn(self.sync_engine)
            opened.append(value)
            return value

        try:
            return await worker.call(open_)
        except asyncio.CancelledError:
            worker._jobs.put((asyncio.get_running_loop(), asyncio.get_running_loop().create_future(),
                              _close_opened, (opened,)))     # after open_, whenever it finishes
            self._give(worker)
            raise
        except BaseException:
            self._give(worker)
            raise

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        worker = self._take()
        sync = await self._open(worker, Engine.connect)
        try:
            yield AsyncConnection(sync, worker)
        finally:
            try:
                await _to_completion(worker.call(sync.close))
            finally:
                self._give(worker)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """As AsyncEngine.begin, with one hop for connect + BEGIN and one for COMMIT + close."""
        worker = self._take()
        sync, trans = await self._open(worker, _connect_begin)
        try:
            try:
                yield AsyncConnection(sync, worker)
            except BaseException as exc:
                await _to_completion(worker.call(_end, sync, trans, exc))
                raise
            await _to_completion(worker.call(_end, sync, trans, None))
        finally:
            self._give(worker)

    async def dispose(self) -> None:
        try:
            await self.call(self.sync_engine.dispose)
        finally:
            idle, self._idle = self._idle, []
            for worker in idle:
                worker.stop()


def _close_opened(opened: list[Any]) -> None:
    for value in opened:
        with contextlib.suppress(Exception):   # nobody is left to tell
            (value[0] if isinstance(value, tuple) else value).close()


def _connect_begin(engine: Engine) -> tuple[Connection, Any]:
    sync = engine.connect()
    try:
        trans = sync.begin()
        trans.__enter__()
    except BaseException:
        sync.close()
        raise
    return sync, trans


def _end(sync: Connection, trans: Any, exc: BaseException | None) -> None:
    """Commit (or, with `exc`, roll back) and hand the connection back to the pool."""
    try:
        if exc is None:
            trans.__exit__(None, None, None)
        else:
            trans.__exit__(type(exc), exc, exc.__traceback__)
    finally:
        sync.close()


def upsert(dialect: str, table: Table) -> Any:
    """The dialect's INSERT, which has on_conflict_do_update; PostgreSQL's is imported only when used
    (the SQLite agent never loads SQLAlchemy's PostgreSQL dialects)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def create_engine(url: URL, *, sqlite_cache_kib: int | None = None) -> AsyncEngine:
    """`sqlite_cache_kib`: each SQLite connection's page cache (SQLite's default is 2,000 KiB)."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, sqlite_cache_kib)
    # without a connect timeout an unreachable server hangs the agent/CLI for minutes
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": 10}
    return AsyncEngine(_sync_engine(url, _is_async=True, pool_pre_ping=True, pool_size=5, max_overflow=5,
                                    connect_args=connect_args, json_deserializer=_pg_json_loads))


def _pg_json_loads(text: str | bytes) -> Any:
    """jsonb holds a number as a numeric and writes it back without an exponent: a stored 1e308 comes
    back as 1 and 308 zeros, an integer. No stored integer is that large (counts, ports and ASNs are
    below 2**32), so such a number was written as a real and is read as one."""
    return json.loads(text, parse_int=_int_or_real)


def _int_or_real(digits: str) -> int | float:
    value = int(digits)
    if abs(value) < 2**63:
        return value
    try:
        return float(value)
    except OverflowError:        # beyond any float: not from a valid envelope; leave it as it is
        return value


def _sqlite_engine(url: URL, cache_kib: int | None = None) -> AsyncEngine:
    path = sqlite_path(url)
    # check_same_thread off: the pool's connections live on the worker thread, but a connection the
    # garbage collector or the pool finalises elsewhere must not raise
    kwargs: dict[str, Any] = {"connect_args": {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False,
                                               "factory": _BufferedConnection}}
    if path is None:
        kwargs["poolclass"] = StaticPool       # one shared in-memory database
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the directory for {path}: {exc.strerror or exc}") from None
    engine = ThreadedEngine(_sync_engine(url, **kwargs))

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # take over BEGIN ourselves (below); the driver's implicit BEGIN cannot be made IMMEDIATE
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        pragmas = ["journal_mode=WAL", f"busy_timeout={BUSY_TIMEOUT_MS}", "foreign_keys=ON",
                   "synchronous=NORMAL"]
        if cache_kib is not None:
            pragmas.append(f"cache_size=-{int(cache_kib)}")
        for pragma in pragmas:
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
