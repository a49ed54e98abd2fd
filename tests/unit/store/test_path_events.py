"""Route events from mtr results (path_change, line_mismatch), recorded by Store.write; on SQLite here,
the same scenarios on PostgreSQL in tests/pg/test_path_events_pg.py (the scenarios
themselves: tests/support/path_events.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from netprobe.store import parse_envelope
from netprobe.store.events import route_of, route_of_envelope
from tests.support.path_events import CN2, GT, PathEventScenarios, error_envelope, mtr_envelope, t
from tests.support.report import started
from tests.support.store import TARGET, icmp_envelope


class TestPathEventsSqlite(PathEventScenarios):
    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'events.db'}"


def test_a_round_being_stored_and_the_same_round_read_back_give_the_same_route() -> None:
    """Rounds being written are read from their typed result (route_of_envelope), stored ones from the
    JSON the database returns (route_of): the same route either way, for rounds measured here and for
    the JSON others send, older agents' included."""
    older = copy.deepcopy(mtr_envelope(t(3), GT))
    del older["result"]["reached"]
    for key in ("path_loss_pct", "declared_line", "mismatch"):
        del older["result"]["route"][key]
    in_error, no_hash, no_route, no_label = (copy.deepcopy(mtr_envelope(t(4), GT)) for _ in range(4))
    in_error["result"]["status"] = "error"
    no_hash["result"]["route"]["hash"] = ""
    del no_route["result"]["route"]
    del no_label["result"]["route"]["label"]
    rounds = [mtr_envelope(t(0), CN2), mtr_envelope(t(1), GT), mtr_envelope(t(2), GT, mismatch=False),
              mtr_envelope(t(2), GT, declared="cn2-gt"), mtr_envelope(t(2), CN2, reached=False),
              error_envelope(t(2)), older, {**older, "target": {**TARGET, "line": "163"}}, in_error, no_hash,
              no_route, no_label, icmp_envelope(t(5), [1.0])]
    routes = []
    for env in rounds:
        from_json = route_of(env["id"], started(env), env)
        assert route_of_envelope(parse_envelope(env)) == from_json, env
        routes.append(from_json)
    assert [r is not None for r in routes] == [True] * 4 + [False, False, True, True] + [False] * 3 + \
        [True, False]
    assert routes[6] is not None and routes[6].declared == "cn2-gia" and not routes[6].mismatch
    assert routes[7] is not None and routes[7].declared == "163"
    assert routes[11] is not None and routes[11].label is None
