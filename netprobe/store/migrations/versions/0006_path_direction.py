"""Route events per direction (docs/probes.md): path_changes.direction says which way the path runs,
forward (agent → target, the mtr probe) or return (target → agent, rmtr). Every event stored before
was an mtr event: forward.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # the server default fills the existing rows (and SQLite needs one to add a NOT NULL column)
    op.add_column("path_changes", sa.Column("direction", sa.String(16), nullable=False,
                                            server_default="forward"))


def downgrade() -> None:
    with op.batch_alter_table("path_changes") as batch:
        batch.drop_column("direction")
