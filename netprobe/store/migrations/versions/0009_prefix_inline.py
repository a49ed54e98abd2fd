"""Kept so that databases stamped with it stay on the path: it used to keep the prefix rows' values in
the row (STORAGE MAIN, LZ4), which made the PostgreSQL table 1.6× larger for a report no faster.
0010 undoes it where it was applied; applied now, it does nothing.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
