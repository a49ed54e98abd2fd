"""Async engine creation (SQLite pragmas, write locking) and driver errors → StorageError."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from netprobe.errors import StorageError
from netprobe.store.urls import display_url, sqlite_path

BUSY_TIMEOUT_MS = 30_000
# read-only transactions set this so SQLite does not take the write lock for them
READ_ONLY = {"netprobe_read_only": True}


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
    return StorageError(f"{doing} {display_url(url)} failed: {detail}")


@asynccontextmanager
async def mapped_errors(url: URL | str, doing: str) -> AsyncIterator[None]:
    """Turn SQLAlchemy/driver/OS errors raised inside into StorageError."""
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        raise storage_error(exc, url, doing) from exc
