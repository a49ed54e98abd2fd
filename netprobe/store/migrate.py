"""Alembic, configured in code so it works from a checkout, an editable and a wheel install."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import ResolutionError
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.engine import Connection

from netprobe.errors import StorageError

# Any fixed number: PostgreSQL advisory lock that serialises concurrent upgrades (several collectors).
_PG_UPGRADE_LOCK = 0x6E657470


def migrations_dir() -> Path:
    """The Alembic scripts: `migrations/` at the top of the source tree."""
    here = Path(__file__).resolve().parent
    # netprobe/store/migrations is a symlink to it in the tree, a real copy in a wheel (package data)
    for candidate in (here / "migrations", here.parents[1] / "migrations"):
        if (candidate / "env.py").is_file() and (candidate / "versions").is_dir():
            return candidate
    raise StorageError(f"Alembic migrations not found (looked in {here.parents[1] / 'migrations'} "
                       f"and {here / 'migrations'}); the installation is incomplete")


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head") -> str | None:
    """Run inside an open transaction; returns the revision the database is at afterwards."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_UPGRADE_LOCK})
    _check_known(connection)
    command.upgrade(alembic_config(connection), revision)
    return current_revision(connection)


def downgrade(connection: Connection, revision: str = "base") -> str | None:
    _check_known(connection)
    command.downgrade(alembic_config(connection), revision)
    return current_revision(connection)


def _check_known(connection: Connection) -> None:
    current = current_revision(connection)
    if current is None:
        return
    try:
        known = ScriptDirectory.from_config(alembic_config()).get_revision(current) is not None
    except (CommandError, ResolutionError):
        known = False
    if not known:
        raise StorageError(f"the database is at revision {current!r}, which this netprobe does not know "
                           "(written by a newer version?); upgrade netprobe")
