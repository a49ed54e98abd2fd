"""The dashboard in a real browser (issue 14 point 2): an agent on the lab uploads to a collector with its
dashboard on; headless Chromium (Debian's, driven by Playwright) opens the overview, follows a link to a
target page and its 1-day span link, visits the agents page; the screenshots show the charts, and every
request the pages made went to the collector itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from netprobe.dashboard.layout import loss_colour
from netprobe.lab.addressing import AGENT_NS
from tests.support.browser import coloured_pixels, ink, load_png
from tests.support.collector import (
    CLI,
    CollectorProcess,
    add_agent,
    collected_ids,
    lab_uplink_agent,
    wait_for,
)
from tests.support.dashboard import add_viewer, dashboard_config
from tests.support.lab import LabState, running_lab
from tests.support.pg import scratch_database

pytestmark = [pytest.mark.lab, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
PG_SOCKET_DIR = "/var/run/postgresql"
ORIGIN = "http://127.0.0.1:8471"
SPEC: dict[str, Any] = {
    "lab": {"seed": 14},
    "routes": [
        {"id": "hk", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 30.0},
        {"id": "tokyo", "datacenter": "tokyo", "line": "163",
         "forward": {"delay_ms": 40.0, "loss_pct": 20.0}, "reverse": {"delay_ms": 40.0}},
    ],
}


def evening_zone(now: datetime) -> str:
    """A fixed-offset zone where it is 21:xx now: inside the evening peak (20–23), so the rounds the
    agent measures now are the last peak's, which the overview ranks."""
    k = (21 - now.hour) % 24
    k = k - 24 if k > 14 else k
    return "Etc/GMT" if k == 0 else f"Etc/GMT{-k:+d}"       # Etc/GMT-8 is UTC+8


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


def test_overview_to_target_page_in_chromium(lab: LabState, tmp_path: Path) -> None:
    with scratch_database() as tcp_url:
        db_url = make_url(tcp_url).set(host="", query={"host": PG_SOCKET_DIR}).render_as_string(False)
        config = dashboard_config(tmp_path / "collector.toml", db_url, "127.0.0.1:8471")
        token = tmp_path / "uplink.token"
        add_agent(config, "lab-dash", token)
        secret = add_viewer(config, "ops")
        collector = CollectorProcess(config, ORIGIN, tmp_path / "collector.log", netns=AGENT_NS)
        collector.start()
        db, cfg, log = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "agent.log"
        zone = evening_zone(datetime.now(UTC))
        cfg.write_text(lab_uplink_agent("lab-dash", db, token, url=ORIGIN, zone=zone, count=5, batch=20))
        with log.open("ab") as out:
            agent = subprocess.Popen(["ip", "netns", "exec", AGENT_NS, *CLI, "agent", "run", "--config",
                                      str(cfg)], stdout=out, stderr=out)
        try:
            wait_for(lambda: len(collected_ids(db_url, "lab-dash")) >= 20, 60, "the agent's uploads",
                     every=0.5)
            shots = tmp_path / "shots"
            shots.mkdir()
            args = tmp_path / "browse.json"
            args.write_text(json.dumps({"url": ORIGIN + "/", "user": "ops", "secret": secret,
                                        "out": str(shots)}))
            t0 = time.monotonic()
            run = subprocess.run(["ip", "netns", "exec", AGENT_NS, sys.executable, "-m",
                                  "tests.support.browse", str(args)],
                                 cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stderr[-3000:]
            seen = json.loads(run.stdout)
            browse_s = time.monotonic() - t0
        finally:
            agent.terminate()
            agent.wait(15)
            status = collector.stop()
        assert status == 0, collector.log()

    assert seen["statuses"] == {"overview": 200, "agents": 200}
    # No external requests: every one of them (pages, anything they would load) went to the collector.
    assert seen["requests"] and all(u.startswith(ORIGIN + "/") for u in seen["requests"]), seen["requests"]
    assert len(seen["requests"]) == 4, seen["requests"]        # the four pages, nothing else
    assert re.fullmatch(r"/target/lab-dash/(hk-cn2|tokyo-163)\?days=7", seen["href"]), seen["href"]
    assert seen["target_url"] == ORIGIN + seen["href"]
    assert seen["span_url"] == ORIGIN + seen["href"].replace("days=7", "days=1")
    # The overview's bars: the clean line in green, the lossy 163 line in red.
    overview = load_png(shots / "overview.png")
    for colour in (loss_colour(0.0), loss_colour(20.0)):
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        assert coloured_pixels(overview, (rgb[0], rgb[1], rgb[2])) > 200, colour
    assert ink(load_png(shots / "overview_bar.png")) > 100
    # The target page's chart (over 1 day: the rounds are minutes old) has marks drawn, not just its frame.
    assert ink(load_png(shots / "target_chart.png")) > 60
    # The agents page: the backlog and clock offset its uploads reported.
    row = next(line for line in seen["agents_text"].splitlines() if line.startswith("lab-dash"))
    assert re.search(r"\t[0-9,]+\t[+-][0-9]+ ms\t", row), row
    assert browse_s < 60
