"""Probe-specific sums in the hourly rollups (sse: gap p95, stalls, stream time, delay variation p95).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # JSON text like the sketch column: {"name": [sum, count], ...}, merged by adding
    op.add_column("rollups_hourly", sa.Column("extras", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rollups_hourly") as batch:
        batch.drop_column("extras")
