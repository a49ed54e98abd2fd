"""Dashboard (docs/dashboard.md): viewer credentials, stored hashed as agent tokens
are; and each agent's health
as its uplink last reported it (outbox backlog, clock offset), next to agents.last_seen.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dashboard_viewers",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_dashboard_viewers"),
    )
    op.add_column("agents", sa.Column("outbox_backlog", sa.Integer(), nullable=True))
    op.add_column("agents", sa.Column("clock_offset_ms", sa.Float(), nullable=True))
    op.add_column("agents", sa.Column("health_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Not batch_alter_table: on SQLite that copies and drops `agents`, which the rounds' foreign keys
    # refuse; both databases drop a plain column in place (SQLite since 3.35).
    for column in ("health_at", "clock_offset_ms", "outbox_backlog"):
        op.execute(f"ALTER TABLE agents DROP COLUMN {column}")
    op.drop_table("dashboard_viewers")
