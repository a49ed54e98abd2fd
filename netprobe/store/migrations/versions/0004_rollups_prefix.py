"""Prefix rollups: per agent × target × probe, everything rolled up before an instant, by local hour of
day, so any run of local days is one difference of two rows (netprobe.store.prefix). Built from the
hourly rows by the maintenance fold (and `netprobe db upgrade`), so existing databases are backfilled.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def upgrade() -> None:
    op.create_table(
        "rollups_prefix",
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        sa.Column("probe", sa.String(32), nullable=False),
        sa.Column("folded_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("hours", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        *(sa.Column(f"l{k}", sa.Text, nullable=True) for k in range(10)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "target_id", "probe", "folded_until", name="pk_rollups_prefix"),
    )
    # The report's per-agent questions (worst hour, exact bounds, the tail after the last fold).
    op.create_index("ix_rollups_hourly_agent_probe_hour", "rollups_hourly", ["agent_id", "probe", "hour"])


def downgrade() -> None:
    op.drop_index("ix_rollups_hourly_agent_probe_hour", table_name="rollups_hourly")
    op.drop_table("rollups_prefix")
