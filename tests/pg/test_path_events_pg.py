"""Route events on the real PostgreSQL server: the scenarios of test_path_events.py, each in a fresh
database (the pg_url fixture of tests/pg/conftest.py), plus one on a database whose default collation
is locale-aware."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from netprobe.store import open_store
from tests.support.path_events import CN2, CN2_ECMP, PathEventScenarios, brief, change, mtr_envelope, t
from tests.support.pg import scratch_database
from tests.support.store import connection, path_events, typed

pytestmark = pytest.mark.postgres


class TestPathEventsPostgres(PathEventScenarios):
    @pytest.fixture
    def url(self, request: pytest.FixtureRequest) -> str:
        return str(request.getfixturevalue("pg_url"))      # a fresh database per test, as test_store_pg


@pytest.fixture
def icu_pg_url() -> Iterator[str]:
    """Like pg_url, but the database sorts text the en-US way (ICU): "q1" < "Q9", unlike Python."""
    icu = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
    with scratch_database(icu) as url:
        yield url


async def test_ties_order_by_id_as_python_does_whatever_the_collation(icu_pg_url: str) -> None:
    store = await open_store(icu_pg_url)
    try:
        async with connection(icu_pg_url) as conn:
            assert (await conn.exec_driver_sql("SELECT 'q1' < 'Q9'")).scalar() is True
        await store.write(typed([mtr_envelope(t(0), CN2, result_id="p"),
                                 mtr_envelope(t(5), CN2_ECMP, result_id="Q9")]))
        await store.write(typed([mtr_envelope(t(5), CN2_ECMP, result_id="q1")]))  # after Q9: the same path
        assert brief(await path_events(store)) == [change(t(5), CN2, CN2_ECMP)]
    finally:
        await store.close()

