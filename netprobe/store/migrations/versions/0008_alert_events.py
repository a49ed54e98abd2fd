"""Alert history: alert_events records every alert transition (firing, resolved, local) with the quorum
scope and the agents that agreed, for the dashboard (docs/dashboard.md).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def _json(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True)


def upgrade() -> None:
    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("rule", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        sa.Column("datacenter", sa.String(128)),
        sa.Column("line", sa.String(64)),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("local", sa.Boolean(), nullable=False),
        sa.Column("scope", sa.String(16)),
        sa.Column("scope_value", sa.String(128)),
        sa.Column("quorum", sa.Integer()),
        _json("agents"),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        _json("details"),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
    )
    op.create_index("ix_alert_events_agent_target_at", "alert_events", ["agent_id", "target_id", "at"])
    op.create_index("ix_alert_events_rule_agent_target", "alert_events", ["rule", "agent_id", "target_id"])


def downgrade() -> None:
    op.drop_index("ix_alert_events_rule_agent_target", table_name="alert_events")
    op.drop_index("ix_alert_events_agent_target_at", table_name="alert_events")
    op.drop_table("alert_events")
