"""Collector: per-agent bearer tokens, stored as sha256 hashes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def upgrade() -> None:
    # No foreign key to agents: a token is issued before the agent has sent anything.
    op.create_table(
        "agent_tokens",
        sa.Column("agent_id", sa.String(ID), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("agent_id", name="pk_agent_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_agent_tokens_token_hash"),
    )


def downgrade() -> None:
    op.drop_table("agent_tokens")
