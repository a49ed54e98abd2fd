"""The newest route round of a pair, on the real server: whether or not the pair has rounds of the
route probe, the lookup reads a few index entries (EXPLAIN ANALYZE), not the pair's other rounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from netprobe.store import open_store
from netprobe.store.fleet import _NEWEST, detected_lines
from tests.support.path_events import CN2, mtr_envelope
from tests.support.pg import scratch_database
from tests.support.store import icmp_envelope, typed

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 11, 1, tzinfo=UTC)
ICMP_ROUNDS = 3000


def _plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _plan_nodes(child))]


def _explained(url: str, agent: str, target: str, probe: str, now: datetime) -> list[dict[str, Any]]:
    sql = _NEWEST.format(agent="%(a)s", target="%(t)s", depth=1).replace("IN %(probes)s", "IN (%(p)s)")
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("ANALYZE probe_results")
        [(out,)] = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}",
                                {"a": agent, "t": target, "p": probe, "now": now}).fetchall()
    return _plan_nodes(out[0]["Plan"])


async def test_the_newest_route_round_costs_the_same_with_or_without_one() -> None:
    with scratch_database() as url:
        store = await open_store(url)
        try:
            rounds = [icmp_envelope(T0 + timedelta(minutes=i), [20.0, 21.0], target=target,
                                    result_id=f"{target}-{i}")
                      for target in ("traced", "untraced") for i in range(ICMP_ROUNDS)]
            rounds.append(mtr_envelope(T0 + timedelta(minutes=5), CN2, target="traced", result_id="m"))
            for k in range(0, len(rounds), 1000):
                await store.write(typed(rounds[k:k + 1000]))
            now = T0 + timedelta(days=30)
            agent = rounds[0]["agent"]["id"]
            for target, found in (("traced", 1), ("untraced", 0)):
                nodes = _explained(url, agent, target, "mtr", now)
                scans = [n for n in nodes if "Scan" in n["Node Type"]]
                assert [n.get("Index Name") for n in scans] == ["ix_probe_results_agent_target_probe_started"]
                assert scans[0]["Actual Rows"] == found
                # the icmp rounds are neither read nor filtered out one by one
                assert all(n.get("Rows Removed by Filter", 0) == 0 for n in nodes)
                assert sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0) for n in scans) < 10
            got = await detected_lines(store, [(agent, "traced"), (agent, "untraced")], now)
            assert set(got) == {(agent, "traced")}
        finally:
            await store.close()
