"""Route events from mtr results (path_change, line_mismatch), recorded by Store.write; on SQLite here,
the same scenarios on PostgreSQL in tests/pg/test_path_events_pg.py (the scenarios
themselves: tests/support/path_events.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.path_events import PathEventScenarios


class TestPathEventsSqlite(PathEventScenarios):
    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'events.db'}"
