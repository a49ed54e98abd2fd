"""Prefix rollups stored as binary (netprobe.store.prefix: little-endian arrays that NumPy reads without a
parse) instead of JSON text. The rows are derived data: the table is emptied and rebuilt by the fold that
`netprobe db upgrade` runs (and the agent's and collector's hourly upkeep); readers take the hourly rows
until then, so nothing is lost in between.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def _table(kind: type[sa.LargeBinary] | type[sa.Text]) -> None:
    op.create_table(
        "rollups_prefix",
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        sa.Column("probe", sa.String(32), nullable=False),
        sa.Column("folded_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("hours", sa.Integer, nullable=False),
        sa.Column("payload", kind, nullable=False),
        *(sa.Column(f"l{k}", kind, nullable=True) for k in range(10)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "target_id", "probe", "folded_until", name="pk_rollups_prefix"),
    )


def upgrade() -> None:
    op.drop_table("rollups_prefix")
    _table(sa.LargeBinary)
    op.execute("DELETE FROM store_meta WHERE key = 'prefix_refold_from'")


def downgrade() -> None:
    op.drop_table("rollups_prefix")
    _table(sa.Text)
