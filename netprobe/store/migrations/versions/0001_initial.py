"""Initial schema: agents, targets, raw rounds, hourly rollups, path changes, alert states, outbox.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def _ts(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _json(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(ID), nullable=False),
        sa.Column("region", sa.String(128)),
        sa.Column("isp", sa.String(128)),
        sa.Column("timezone", sa.String(64)),
        _json("info"),
        sa.Column("token_hash", sa.String(255)),
        _ts("first_seen"),
        _ts("last_seen"),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
    )
    op.create_table(
        "targets",
        sa.Column("id", sa.String(ID), nullable=False),
        sa.Column("host", sa.String(255)),
        sa.Column("datacenter", sa.String(128)),
        sa.Column("line", sa.String(64)),
        _json("info"),
        _ts("first_seen"),
        _ts("last_seen"),
        sa.PrimaryKeyConstraint("id", name="pk_targets"),
    )
    op.create_table(
        "probe_results",
        sa.Column("id", sa.String(ID), nullable=False),
        sa.Column("probe", sa.String(32), nullable=False),
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        _ts("started_at"),
        sa.Column("status", sa.String(16), nullable=False),
        _json("envelope", nullable=False),
        _ts("stored_at"),
        sa.PrimaryKeyConstraint("id", name="pk_probe_results"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_probe_results_agent_id_agents"),
        sa.ForeignKeyConstraint(["target_id"], ["targets.id"], name="fk_probe_results_target_id_targets"),
    )
    op.create_index("ix_probe_results_agent_target_started", "probe_results",
                    ["agent_id", "target_id", "started_at"])
    op.create_index("ix_probe_results_started_at", "probe_results", ["started_at"])
    op.create_table(
        "rollups_hourly",
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        sa.Column("probe", sa.String(32), nullable=False),
        _ts("hour"),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("error_rounds", sa.Integer(), nullable=False),
        sa.Column("sent", sa.Integer(), nullable=False),
        sa.Column("received", sa.Integer(), nullable=False),
        sa.Column("duplicates", sa.Integer(), nullable=False),
        sa.Column("loss_pct_sum", sa.Float(), nullable=False),
        sa.Column("loss_rounds", sa.Integer(), nullable=False),
        sa.Column("rtt_min", sa.Float()),
        sa.Column("rtt_max", sa.Float()),
        sa.Column("rtt_sum", sa.Float(), nullable=False),
        sa.Column("rtt_count", sa.Integer(), nullable=False),
        sa.Column("jitter_sum", sa.Float(), nullable=False),
        sa.Column("jitter_count", sa.Integer(), nullable=False),
        sa.Column("sketch", sa.Text()),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("agent_id", "target_id", "probe", "hour", name="pk_rollups_hourly"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_rollups_hourly_agent_id_agents"),
        sa.ForeignKeyConstraint(["target_id"], ["targets.id"], name="fk_rollups_hourly_target_id_targets"),
    )
    op.create_index("ix_rollups_hourly_hour", "rollups_hourly", ["hour"])
    op.create_table(
        "path_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        _ts("detected_at"),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("old_hash", sa.String(64)),
        sa.Column("new_hash", sa.String(64)),
        sa.Column("label", sa.String(32)),
        _json("details"),
        sa.PrimaryKeyConstraint("id", name="pk_path_changes"),
    )
    op.create_index("ix_path_changes_agent_target_detected", "path_changes",
                    ["agent_id", "target_id", "detected_at"])
    op.create_table(
        "alert_states",
        sa.Column("rule", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("target_id", sa.String(ID), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("bad_windows", sa.Integer(), nullable=False),
        sa.Column("value", sa.Float()),
        _ts("started_at", nullable=True),
        _ts("updated_at"),
        _json("details"),
        sa.PrimaryKeyConstraint("rule", "agent_id", "target_id", name="pk_alert_states"),
    )
    op.create_table(
        "outbox",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("result_id", sa.String(ID), nullable=False),
        _json("payload", nullable=False),
        _ts("created_at"),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _ts("next_attempt_at"),
        sa.Column("last_error", sa.Text()),
        sa.PrimaryKeyConstraint("seq", name="pk_outbox"),
        sa.UniqueConstraint("result_id", name="uq_outbox_result_id"),
    )
    op.create_index("ix_outbox_next_attempt_at", "outbox", ["next_attempt_at"])
    op.create_table(
        "store_meta",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_store_meta"),
    )


def downgrade() -> None:
    for table in ("store_meta", "outbox", "alert_states", "path_changes", "rollups_hourly",
                  "probe_results", "targets", "agents"):
        op.drop_table(table)
