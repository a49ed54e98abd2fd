"""The dashboard on a real `netprobe collector run` (PostgreSQL): viewers from the CLI, HTTP Basic (401),
the prefix, GET/HEAD only (405), the days parameter (400), the overview's rows at the last evening
peak, and the agents page with the backlog and clock offset an upload's headers reported."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from netprobe.net.upload_health import BACKLOG_HEADER, SENT_AT_HEADER
from netprobe.report.windows import DEFAULT_WINDOW, last_window_end
from tests.support.collector import CLI, CollectorProcess, add_agent, wait_for
from tests.support.dashboard import Answer, add_viewer, basic, dashboard_config, fetch
from tests.support.farend import free_tcp_port
from tests.support.pg import scratch_database
from tests.support.store import AGENT, TARGET, icmp_envelope

pytestmark = pytest.mark.postgres

PREFIX = "/np/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str, str]]:
    """(config, collector URL, viewer auth header, agent token) of one collector for the module."""
    tmp = tmp_path_factory.mktemp("dash")
    with scratch_database() as db:
        port = free_tcp_port()
        config = dashboard_config(tmp / "collector.toml", db, f"127.0.0.1:{port}", PREFIX, refresh="1s")
        secret = add_viewer(config, "ops")
        token = add_agent(config, AGENT["id"], tmp / "token")
        collector = CollectorProcess(config, f"http://127.0.0.1:{port}", tmp / "collector.log")
        collector.start()
        try:
            yield config, collector.url, basic("ops", secret), token
        finally:
            assert collector.stop() == 0, collector.log()


def _upload(url: str, token: str, rounds: list[dict[str, object]], headers: dict[str, str]) -> Answer:
    return fetch(f"{url}/api/v1/results", method="POST", body=gzip.compress(json.dumps(rounds).encode()),
                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                          "Content-Encoding": "gzip", **headers})


def test_viewer_credentials_and_methods(site: tuple[Path, str, str, str]) -> None:
    config, url, auth, _ = site
    missing = fetch(url + PREFIX)
    assert missing.status == 401 and missing.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert fetch(url + PREFIX, basic("ops", "wrong")).status == 401
    assert fetch(url + PREFIX, basic("nobody", "x")).status == 401
    assert fetch(url + PREFIX, "Basic !!notbase64").status == 401
    page = fetch(url + PREFIX, auth)
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert "<script" not in page.text and "Evening peak ranking" in page.text
    assert fetch(url + PREFIX, auth, method="HEAD").status == 200
    for method in ("POST", "PUT", "DELETE"):
        refused = fetch(url + PREFIX + "agents", auth, method=method, body=b"x")
        assert refused.status == 405 and refused.headers["Allow"] == "GET, HEAD"
    assert fetch(url + "/", auth).status == 404          # outside the prefix: not the dashboard
    assert fetch(url + "/healthz").status == 200          # the collector's own paths are as they were

    listed = subprocess.run([*CLI, "collector", "list-viewers", "--config", str(config), "--json"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert [v["name"] for v in json.loads(listed)["viewers"]] == ["ops"]
    second = add_viewer(config, "noc")
    assert fetch(url + PREFIX, basic("noc", second)).status == 200
    subprocess.run([*CLI, "collector", "revoke-viewer", "noc", "--config", str(config)], capture_output=True,
                   timeout=60, check=True)
    assert fetch(url + PREFIX, basic("noc", second)).status == 401
    assert fetch(url + PREFIX, auth).status == 200


def test_days_parameter(site: tuple[Path, str, str, str]) -> None:
    _, url, auth, _ = site
    page = f"{url}{PREFIX}target/{AGENT['id']}/{TARGET['id']}"
    for bad in ("0", "91", "abc", "7.5", "-1", "1e1"):
        got = fetch(f"{page}?days={bad}", auth)
        assert got.status == 400 and "days: expected a whole number of days from 1 to 90" in got.text, bad
    assert fetch(f"{page}?days=1&days=2", auth).status == 400
    assert fetch(f"{page}?days=0").status == 401          # credentials first: nothing is said without them
    assert fetch(f"{url}{PREFIX}target/nobody/nothing?days=7", auth).status == 404


def test_rounds_and_health_show_on_the_pages(site: tuple[Path, str, str, str]) -> None:
    _, url, auth, token = site
    now = datetime.now(UTC)
    zone = ZoneInfo(AGENT["timezone"])
    end = last_window_end(DEFAULT_WINDOW, zone, now)
    start = end.astimezone(zone).replace(hour=DEFAULT_WINDOW.start, minute=0, second=0, microsecond=0)
    at = end - min(timedelta(minutes=30), (end - start) / 2)     # inside the last evening peak (so far)
    rounds = [icmp_envelope(at + timedelta(seconds=i), [20.0 + i, 21.0, 22.0, None]) for i in range(5)]
    sent = now - timedelta(seconds=3)        # an agent whose clock is 3 s behind
    bad = _upload(url, token, rounds, {BACKLOG_HEADER: "12x", SENT_AT_HEADER: sent.isoformat()})
    assert bad.status == 400 and BACKLOG_HEADER in bad.text
    bad = _upload(url, token, rounds, {BACKLOG_HEADER: "12", SENT_AT_HEADER: "yesterday"})
    assert bad.status == 400 and SENT_AT_HEADER in bad.text
    stamp = sent.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    ok = _upload(url, token, rounds, {BACKLOG_HEADER: "1234", SENT_AT_HEADER: stamp})
    assert ok.status == 200 and json.loads(ok.text)["accepted"] == 5, ok.text

    agents = fetch(url + PREFIX + "agents", auth)
    assert agents.status == 200 and AGENT["id"] in agents.text and "1,234" in agents.text
    offset = int(re.findall(r">([+-][0-9]+) ms<", agents.text)[0])
    assert -3500 <= offset <= -2900, offset        # −3 s, less the upload's time on loopback

    # The overview's rows were computed before the upload (the first test): a request after `refresh`
    # (1 s) is answered with them and recomputes them in the background; a later one has the new rows.
    link = f'href="{PREFIX}target/{AGENT["id"]}/{TARGET["id"]}?days=7"'
    wait_for(lambda: link in fetch(url + PREFIX, auth).text, 15, "the overview's rows recomputed", every=0.5)
    overview = fetch(url + PREFIX, auth).text
    assert f"Region {AGENT['region']}" in overview and "recomputed at most every 1 s" in overview
    target = fetch(f"{url}{PREFIX}target/{AGENT['id']}/{TARGET['id']}?days=30", auth)
    assert target.status == 200 and TARGET["id"] in target.text
    assert f'href="{PREFIX}target/{AGENT["id"]}/{TARGET["id"]}?days=90"' in target.text   # the span links
