"""Fixtures of the PostgreSQL tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pg import scratch_database


@pytest.fixture
def pg_url() -> Iterator[str]:
    with scratch_database() as url:
        yield url
