"""The result envelope's JSON Schema: generated from the wire models, served by a real collector at
GET /api/v1/schema/envelope.json, identical to the docs' copy, and true of the envelopes a real agent
writes — while what the collector refuses by type, the schema refuses too."""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from netprobe.store import open_store
from netprobe.store.wire_schema import SCHEMA_COMMAND, envelope_schema
from tests.support.agent import PORT, Daemon, _write
from tests.support.collector import CollectorProcess, add_agent, collector_config
from tests.support.lab import require_root
from tests.support.schema import assert_schema_valid, validator
from tests.support.servers import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "envelope.schema.json"


def test_docs_copy_is_what_the_models_generate() -> None:
    assert json.loads(DOC.read_text()) == envelope_schema(), f"regenerate: {SCHEMA_COMMAND}"


async def _rows(db: Path) -> list[dict[str, Any]]:
    store = await open_store(f"sqlite:///{db}", upgrade=False)
    try:
        return [r.envelope.raw for r in await store.results("t-agent")]
    finally:
        await store.close()


def _post(url: str, token: str, envelopes: list[dict[str, Any]]) -> int:
    body = gzip.compress(json.dumps(envelopes).encode())
    req = urllib.request.Request(f"{url}/api/v1/results", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.mark.lab
def test_collector_serves_the_schema_and_real_envelopes_meet_it(tmp_path: Path) -> None:
    require_root()  # the agent's icmp probe opens raw sockets
    url = f"http://127.0.0.1:{free_port()}"
    config = collector_config(tmp_path / "collector.toml", f"sqlite:///{tmp_path / 'c.db'}", url[7:])
    token = add_agent(config, "t-agent", tmp_path / "agent.token")
    collector = CollectorProcess(config, url, tmp_path / "collector.log")
    collector.start()
    try:
        with urllib.request.urlopen(f"{url}/api/v1/schema/envelope.json", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("application/schema+json")
            served = json.loads(resp.read())
        assert served == envelope_schema() == json.loads(DOC.read_text())

        db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
        _write(cfg, db, PORT)
        agent = Daemon(cfg)
        time.sleep(3.0)
        code, _, err = agent.stop()
        assert code == 0, err
        rows = asyncio.run(_rows(db))
        assert {r["probe"] for r in rows} == {"icmp", "tcp"}
        assert {r["result"]["status"] for r in rows} >= {"ok", "error"}    # a dns failure is an envelope too
        assert assert_schema_valid(rows) == len(rows) >= 6
        assert _post(url, token, rows) == 200                               # and the collector takes them

        # one value of the wrong JSON type: refused by the schema and, for the same reason, by the collector
        bad = copy.deepcopy(next(r for r in rows if r["probe"] == "icmp" and r["result"]["status"] == "ok"))
        bad["id"] += "-bad"
        bad["result"]["sent"] = str(bad["result"]["sent"])
        assert list(validator().iter_errors(bad))
        assert _post(url, token, [bad]) == 400
        unknown = copy.deepcopy(rows[0]) | {"id": "unknown-probe", "probe": "bogus"}
        assert list(validator().iter_errors(unknown))
        assert _post(url, token, [unknown]) == 400
    finally:
        collector.stop()
