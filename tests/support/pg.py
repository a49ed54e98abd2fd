"""Scratch PostgreSQL databases for tests: a fresh database per test on the server at NETPROBE_TEST_PG."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

# The server's maintenance database; each test gets a fresh database of its own next to it.
ADMIN_URL = os.environ.get("NETPROBE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _admin_dsn() -> str:
    return make_url(ADMIN_URL).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def scratch_database(options: str = "") -> Iterator[str]:
    """A new, empty database on the server (CREATE DATABASE … `options`), dropped afterwards."""
    name = f"netprobe_test_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(_admin_dsn(), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        # In CI (.ci/run starts the server) an unreachable database is a failure, never a skip.
        if os.environ.get("NETPROBE_REQUIRE_ALL") == "1":
            pytest.fail(f"PostgreSQL not reachable at {ADMIN_URL}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {ADMIN_URL}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}" {options}')
        try:
            yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# The two stores a test runs on: pytest.fixture(params=BOTH) with `database_url(request.param, tmp_path)`
BOTH = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@contextmanager
def database_url(kind: str, directory: Path) -> Iterator[str]:
    """A fresh database: "sqlite" a file in `directory`, "postgresql" a scratch database on the server."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'netprobe.db'}"
    else:
        with scratch_database() as url:
            yield url
