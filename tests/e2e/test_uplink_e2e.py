"""Agent → collector → PostgreSQL, all real processes: a SIGKILL mid-upload loses nothing and stores
nothing twice. The agent probes a TCP listener on loopback; a holding proxy between it and the
collector lets a batch reach the collector (stored) while its answer never reaches the agent."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.collector import (
    CLI,
    CollectorProcess,
    add_agent,
    assert_exactly_once,
    collected_ids,
    collector_config,
    local_ids,
    outbox_ids,
    wait_for,
)
from tests.support.pg import scratch_database

pytestmark = pytest.mark.postgres

AGENT = """
[agent]
id = "e2e-agent"
region = "test"
isp = "lo"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[probes.tcp]
every = "0.5s"
count = 1
interval = "0.1s"
timeout = "0.4s"

[[targets]]
id = "lo-a"
host = "127.0.0.1"
probes = ["tcp"]
tcp_port = {port}

[[targets]]
id = "lo-b"
host = "127.0.0.1"
probes = ["tcp"]
tcp_port = {port}

[uplink]
url = "{uplink}"
token_file = "{token}"
retry_max = "1s"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener() -> Iterator[int]:
    """What the agent's tcp probes connect to."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(256)
    stop = False

    def serve() -> None:
        while not stop:
            try:
                srv.accept()[0].close()
            except OSError:
                return

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop = True
    srv.close()


class HoldingProxy:
    """Forwards each upload to the collector, then never answers: the batch is stored, un-acked."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.forwarded: list[int] = []   # the collector's status per forwarded batch
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.release = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k in ("Authorization", "Content-Type")}
        async with aiohttp.ClientSession() as s, s.post(self.upstream + request.path, data=body,
                                                         headers=headers) as resp:
            await resp.read()
            self.forwarded.append(resp.status)
        await self.release.wait()  # set only on exit, after the agent is gone
        return web.Response(status=503)

    async def _start(self) -> web.AppRunner:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/api/v1/results", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner

    def __enter__(self) -> HoldingProxy:
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.release.set)
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def start_agent(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, "agent", "run", "--config", str(cfg)], stdout=out, stderr=out)


def test_agent_killed_mid_upload_loses_nothing_and_stores_nothing_twice(tmp_path: Path,
                                                                      listener: int) -> None:
    with scratch_database() as db_url:
        port = free_port()
        ccfg = collector_config(tmp_path / "collector.toml", db_url, f"127.0.0.1:{port}")
        token = tmp_path / "uplink.token"
        add_agent(ccfg, "e2e-agent", token)
        collector = CollectorProcess(ccfg, f"http://127.0.0.1:{port}", tmp_path / "collector.log")
        collector.start()
        db, cfg, log = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "agent.log"
        try:
            with HoldingProxy(collector.url) as proxy:
                cfg.write_text(AGENT.format(db=db, port=listener, uplink=f"http://127.0.0.1:{proxy.port}",
                                            token=token))
                agent = start_agent(cfg, log)
                try:
                    wait_for(lambda: bool(proxy.forwarded) or agent.poll() is not None, 30,
                             "a first upload through the proxy")
                    assert agent.poll() is None, log.read_text()
                    time.sleep(1.5)  # more rounds pile up behind the held request
                finally:
                    agent.send_signal(signal.SIGKILL)
                    agent.wait(10)
                assert proxy.forwarded == [200]
            stored_first = collected_ids(db_url, "e2e-agent")
            pending = outbox_ids(db)
            assert stored_first and set(stored_first) <= set(pending), \
                "the collector stored the held batch; the agent, never answered, still holds all of it"

            # restarted, straight to the collector: the held batch is replayed (duplicates), the rest new
            cfg.write_text(AGENT.format(db=db, port=listener, uplink=collector.url, token=token))
            agent = start_agent(cfg, log)
            try:
                wait_for(lambda: not outbox_ids(db) and len(local_ids(db)) > len(pending) + 4, 30,
                         "the outbox to empty while new rounds arrive")
            finally:
                agent.send_signal(signal.SIGTERM)
                assert agent.wait(15) == 0, log.read_text()
            assert outbox_ids(db) == []
            assert_exactly_once(local_ids(db), collected_ids(db_url, "e2e-agent"))
            text = log.read_text()
            stopped = [ln for ln in text.splitlines() if "uplink stopped" in ln]
            assert f"duplicates={len(stored_first)}" in stopped[-1], text[-3000:]  # the replay, reported
            assert "Traceback" not in text
        finally:
            assert collector.stop() == 0, collector.log()
