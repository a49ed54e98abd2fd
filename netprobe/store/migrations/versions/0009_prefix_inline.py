"""PostgreSQL: the prefix rows' payload and levels kept in the row (STORAGE MAIN), compressed with LZ4
where the server has it. A prefix row is ~13 KB raw (a 5.7 KB payload, ten levels of 7.7 KB in all),
over the 2 KB toast threshold, so the server had compressed its values with pglz and moved them out of
line: each one a report reads was fetched through the toast table's index. Kept in the row, the
report's statement reading a fleet's prefix rows costs the server much less, and with LZ4 less again
(see bench/README.md, report_scale). The table grows from 1.7 to 2.8 GB (a row fills most
of a page; the hourly rows beside it are 9 GB).

Existing rows are rewritten — copied with each value made anew, so that it is compressed and stored the
new way — into a new table that replaces the old (one pass over a fleet's 363,600 rows). SQLite keeps
its blobs as they are: it has no toast.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VALUES = ("payload", *(f"l{k}" for k in range(10)))
KEYS = ("agent_id", "target_id", "probe", "folded_until", "zone", "hours")


def _has_lz4(bind: sa.Connection) -> bool:
    """The server was built with LZ4 (PostgreSQL 14 and later, where the build has it)."""
    got = bind.execute(sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
    row = got.first()
    return row is not None and "lz4" in row[0]


def _rewrite(storage: str, compression: str | None) -> None:
    """The table copied into one whose values are stored so, then put in its place."""
    new = "rollups_prefix_rewritten"
    op.execute(f"CREATE TABLE {new} (LIKE rollups_prefix INCLUDING DEFAULTS)")
    how = [f"ALTER {c} SET STORAGE {storage}" for c in VALUES]
    if compression is not None:
        how += [f"ALTER {c} SET COMPRESSION {compression}" for c in VALUES]
    op.execute(f"ALTER TABLE {new} {', '.join(how)}")
    # `|| ''` makes each value a new one: copied as it is, a compressed value keeps its method
    columns = ", ".join((*KEYS, *VALUES, "updated_at"))
    made = ", ".join((*KEYS, *(f"{c} || ''::bytea" for c in VALUES), "updated_at"))
    op.execute(f"INSERT INTO {new} ({columns}) SELECT {made} FROM rollups_prefix")
    op.drop_table("rollups_prefix")
    op.rename_table(new, "rollups_prefix")
    op.create_primary_key("pk_rollups_prefix", "rollups_prefix",
                          ["agent_id", "target_id", "probe", "folded_until"])
    op.execute("ANALYZE rollups_prefix")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _rewrite("MAIN", "lz4" if _has_lz4(bind) else None)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _rewrite("EXTENDED", "pglz" if _has_lz4(bind) else None)
