"""An agent on the lab uploads to a collector that is killed for a while and restarted: the collector
ends with exactly the agent's rounds — none missing, none twice. Agent and collector both run in the
lab's agent namespace; the collector reaches PostgreSQL through its Unix socket, which namespaces share."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from netprobe.lab.addressing import AGENT_NS
from tests.support.collector import (
    CLI,
    CollectorProcess,
    add_agent,
    assert_exactly_once,
    collected_ids,
    collector_config,
    lab_uplink_agent,
    local_ids,
    outbox_ids,
    wait_for,
)
from tests.support.lab import LabState, running_lab
from tests.support.pg import scratch_database

pytestmark = [pytest.mark.lab, pytest.mark.postgres]

PG_SOCKET_DIR = "/var/run/postgresql"
SPEC: dict[str, Any] = {
    "lab": {"seed": 5},
    "routes": [
        {"id": "hk", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 30.0},
        {"id": "tokyo", "datacenter": "tokyo", "line": "163",
         "forward": {"delay_ms": 20.0, "loss_pct": 5.0}, "reverse": {"delay_ms": 20.0}},
    ],
}


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


def test_collector_outage_ends_with_exactly_the_agents_rounds(lab: LabState, tmp_path: Path) -> None:
    with scratch_database() as tcp_url:
        db_url = make_url(tcp_url).set(host="", query={"host": PG_SOCKET_DIR}).render_as_string(False)
        ccfg = collector_config(tmp_path / "collector.toml", db_url, "127.0.0.1:8471")
        token = tmp_path / "uplink.token"
        add_agent(ccfg, "lab-uplink", token)
        collector = CollectorProcess(ccfg, "http://127.0.0.1:8471", tmp_path / "collector.log",
                                     netns=AGENT_NS)
        collector.start()
        db, cfg, log = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "agent.log"
        cfg.write_text(lab_uplink_agent("lab-uplink", db, token))
        with log.open("ab") as out:
            agent = subprocess.Popen(["ip", "netns", "exec", AGENT_NS, *CLI, "agent", "run", "--config",
                                      str(cfg)], stdout=out, stderr=out)
        try:
            wait_for(lambda: len(collected_ids(db_url, "lab-uplink")) >= 6, 30, "first uploads", every=0.5)
            collector.kill()
            before = len(local_ids(db))
            time.sleep(5.0)
            # the agent went on probing and storing; its outbox held what the collector missed
            assert agent.poll() is None, log.read_text()
            assert len(local_ids(db)) >= before + 6
            assert len(outbox_ids(db)) >= 6
            collector.start()
            wait_for(lambda: not outbox_ids(db), 30, "the outbox to drain after the collector is back")
        finally:
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(15)
            status = collector.stop()
        text = log.read_text()
        assert code == 0 and "Traceback" not in text, text[-3000:]
        assert status == 0, collector.log()
        assert "upload failed; will retry" in text  # the outage was seen, and ridden out
        local = local_ids(db)
        assert len(local) >= 20 and outbox_ids(db) == []
        assert_exactly_once(local, collected_ids(db_url, "lab-uplink"))
