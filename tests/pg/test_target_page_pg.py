"""The dashboard's target page on the real PostgreSQL server (the scenarios of
tests/support/target_page.py), in a fresh database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pg import scratch_database
from tests.support.target_page import TargetPageScenarios

pytestmark = pytest.mark.postgres


class TestTargetPagePostgres(TargetPageScenarios):
    @pytest.fixture(scope="class")
    def url(self) -> Iterator[str]:
        with scratch_database() as url:
            yield url
