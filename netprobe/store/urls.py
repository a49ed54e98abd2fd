"""Database URLs: what users write → what the engine needs, and where the default lives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

# SQLAlchemy's URL parsing is imported in the functions that parse: the reports' plain-SQL read path
# (netprobe.store.reads) needs only default_db_url and never loads SQLAlchemy.

_PG_NAMES = {"postgresql", "postgres"}


def state_dir() -> Path:
    """$STATE_DIRECTORY (systemd StateDirectory=), else /var/lib/netprobe as root, else ~/.local/state/…"""
    env = os.environ.get("STATE_DIRECTORY", "")
    if env:
        # systemd joins several StateDirectory= entries with ':'; the first is ours
        return Path(env.split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/netprobe")
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "netprobe"


def default_db_url() -> str:
    return f"sqlite:///{state_dir() / 'netprobe.db'}"


def is_url(url: str) -> bool:
    """Whether SQLAlchemy reads `url` as a database URL (of any backend; normalise_url says which
    netprobe can open)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return False
    return True


def is_postgres(url: str) -> bool:
    """Whether `url` names PostgreSQL, by its scheme alone (no SQLAlchemy): as normalise_url reads it."""
    return url.strip().partition(":")[0].partition("+")[0] in _PG_NAMES


def normalise_url(url: str) -> URL:
    """Map any SQLite/PostgreSQL URL onto the drivers netprobe uses: the standard library's sqlite3 (on the
    engine's worker thread, netprobe.store.engine.ThreadedEngine) and psycopg 3's async connections."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url.strip())
    except ArgumentError:
        raise UsageError(f"not a database URL: {url!r} (expected sqlite:///PATH or postgresql://…)") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in _PG_NAMES:
        return parsed.set(drivername="postgresql+psycopg")
    raise UsageError(f"unsupported database {backend!r} in {display_url(parsed)}: "
                     "use sqlite:///PATH or postgresql://USER@HOST/DB")


def display_url(url: URL | str) -> str:
    """The URL with any password masked, for messages and logs."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except ArgumentError:
        return "<unparseable URL>"
    return parsed.render_as_string(hide_password=True)


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite URL; None for in-memory databases."""
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (as normalise_url reads it); None for in-memory SQLite or another
    database. UsageError for what is not a database URL."""
    parsed = normalise_url(url)
    return sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None
