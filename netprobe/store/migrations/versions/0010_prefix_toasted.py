"""PostgreSQL: the prefix rows' values stored as the server stores large values by default (compressed,
out of line in the toast table), where an earlier 0009 kept them in the row. Measured on the fleet
benchmark (10 agents × 100 targets × 90 days, bench/README.md): the table is 1.76 GB instead of
2.84 GB, and the reports take the same time either way.

Only a database whose values are stored in the row is rewritten (one pass over the table: each value
made anew, so it is compressed and stored the default way); any other upgrade does nothing.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VALUES = ("payload", *(f"l{k}" for k in range(10)))
KEYS = ("agent_id", "target_id", "probe", "folded_until", "zone", "hours")


def _in_row(bind: sa.Connection) -> bool:
    got = bind.execute(sa.text(
        "SELECT count(*) FROM pg_attribute WHERE attrelid = 'rollups_prefix'::regclass"
        " AND attname = ANY(:names) AND attstorage = 'm'"), {"names": list(VALUES)})
    return bool(got.scalar())


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql" or not _in_row(bind):
        return
    new = "rollups_prefix_rewritten"
    op.execute(f"CREATE TABLE {new} (LIKE rollups_prefix INCLUDING DEFAULTS)")
    how = [f"ALTER {c} SET STORAGE EXTENDED" for c in VALUES]
    if (bind.dialect.server_version_info or (0,)) >= (14,):
        how += [f"ALTER {c} SET COMPRESSION default" for c in VALUES]
    op.execute(f"ALTER TABLE {new} {', '.join(how)}")
    # `|| ''` makes each value a new one: copied as it is, a compressed value keeps its method and place
    columns = ", ".join((*KEYS, *VALUES, "updated_at"))
    made = ", ".join((*KEYS, *(f"{c} || ''::bytea" for c in VALUES), "updated_at"))
    op.execute(f"INSERT INTO {new} ({columns}) SELECT {made} FROM rollups_prefix")
    op.drop_table("rollups_prefix")
    op.rename_table(new, "rollups_prefix")
    op.create_primary_key("pk_rollups_prefix", "rollups_prefix",
                          ["agent_id", "target_id", "probe", "folded_until"])
    op.execute("ANALYZE rollups_prefix")


def downgrade() -> None:
    pass        # 0009 no longer moves the values into the row: there is nothing to put back
