"""The dashboard's target page on SQLite (the scenarios of tests/support/target_page.py)."""

from __future__ import annotations

import pytest

from tests.support.target_page import TargetPageScenarios


class TestTargetPageSqlite(TargetPageScenarios):
    @pytest.fixture(scope="class")
    def url(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        return f"sqlite:///{tmp_path_factory.mktemp('target') / 'target.db'}"
