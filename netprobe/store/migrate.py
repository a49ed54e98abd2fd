"""Alembic, configured in code so it works from a checkout, an editable and a wheel install.

Alembic (with Mako and Pygments behind it: 100+ modules) is imported only when a migration
really runs: opening a database that is already at the head — every agent and collector start but the
first after an upgrade — reads the revision with one query and the head from the scripts' own text.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netprobe.errors import StorageError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

# SQLAlchemy is imported where a connection is used: the reports' plain-SQL read path
# (netprobe.store.reads) reads script_head() without loading it.

# Any fixed number: PostgreSQL advisory lock that serialises concurrent upgrades (several collectors).
_PG_UPGRADE_LOCK = 0x6E657470
# Whether alembic_version exists, per dialect (also netprobe.store.reads'). Not inspect().has_table: on
# PostgreSQL that loads the catalog reflection machinery, a visible part of a short command's start-up.
HAS_VERSION_TABLE = {
    "postgresql": "SELECT to_regclass('alembic_version') IS NOT NULL",
    "sqlite": "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"}
READ_VERSION = "SELECT version_num FROM alembic_version"


def migrations_dir() -> Path:
    """The Alembic scripts, shipped inside the package (netprobe/store/migrations)."""
    here = Path(__file__).resolve().parent / "migrations"
    if (here / "env.py").is_file() and (here / "versions").is_dir():
        return here
    raise StorageError(f"Alembic migrations not found in {here}; the installation is incomplete")


class MigrationError(Exception):
    """Alembic refused a command (e.g. an unknown revision); Store maps it to StorageError."""


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def script_head() -> str | None:
    """The head read from the scripts' `revision` / `down_revision` lines, without Alembic; None when
    that is not one plain chain (branches, merges, unusual files): then Alembic decides."""
    revisions: dict[str, str | None] = {}
    try:
        for path in sorted((migrations_dir() / "versions").glob("*.py")):
            found: dict[str, object] = {}
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id in ("revision", "down_revision") and node.value:
                            found[t.id] = ast.literal_eval(node.value)
            rev, down = found.get("revision"), found.get("down_revision")
            if not isinstance(rev, str) or not (down is None or isinstance(down, str)) or rev in revisions:
                return None
            revisions[rev] = down
    except (OSError, SyntaxError, ValueError, StorageError):
        return None
    heads = set(revisions) - {d for d in revisions.values() if d is not None}
    return heads.pop() if len(heads) == 1 else None


def _stored_revision(connection: Connection) -> str | None:
    """alembic_version's one row as Alembic reads it; None when there is no table or not one row."""
    from sqlalchemy import inspect, text

    sql = HAS_VERSION_TABLE.get(connection.dialect.name)
    if sql is None:
        exists: Any = inspect(connection).has_table("alembic_version")
    else:
        exists = connection.execute(text(sql)).scalar()
    if not exists:
        return None
    rows = connection.execute(text(READ_VERSION)).all()
    return str(rows[0][0]) if len(rows) == 1 else None


def upgrade(connection: Connection, revision: str = "head") -> str | None:
    """Run inside an open transaction; returns the revision the database is at afterwards."""
    from sqlalchemy import text

    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_UPGRADE_LOCK})
    if revision == "head":
        current = _stored_revision(connection)
        if current is not None and current == script_head():
            return current  # already there: nothing for Alembic to do
    return _command(connection, "upgrade", revision)


def downgrade(connection: Connection, revision: str = "base") -> str | None:
    return _command(connection, "downgrade", revision)


def _command(connection: Connection, name: str, revision: str) -> str | None:
    """Alembic's `name` command (upgrade, downgrade) to `revision`; returns the revision reached."""
    from alembic import command
    from alembic.util import CommandError

    _check_known(connection)
    try:
        getattr(command, name)(alembic_config(connection), revision)
    except CommandError as exc:
        raise MigrationError(str(exc)) from exc
    return current_revision(connection)


def _check_known(connection: Connection) -> None:
    from alembic.script import ScriptDirectory
    from alembic.script.revision import ResolutionError
    from alembic.util import CommandError

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
