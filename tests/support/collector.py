"""A real collector process on PostgreSQL for end-to-end tests, and the agent's view of what it stored."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from netprobe.store import open_store

CLI = [sys.executable, "-m", "netprobe.cli"]


def collector_config(path: Path, db_url: str, listen: str) -> Path:
    path.write_text(f'[collector]\nlisten = "{listen}"\n\n[storage]\nurl = "{db_url}"\n')
    return path


def add_agent(config: Path, agent_id: str, token_file: Path) -> str:
    out = subprocess.run([*CLI, "collector", "add-agent", agent_id, "--config", str(config)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    token = out.strip().splitlines()[-1]
    token_file.write_text(token + "\n")
    return token


class CollectorProcess:
    """`netprobe collector run`, optionally inside a network namespace; its log goes to a file."""

    def __init__(self, config: Path, url: str, log: Path, netns: str | None = None) -> None:
        self.config, self.url, self.log_path, self.netns = config, url, log, netns
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([*prefix, *CLI, "collector", "run", "--config", str(self.config)],
                                         stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"collector exited {self.proc.returncode}:\n{self.log()}")
            if self._healthy():
                return
            time.sleep(0.1)
        raise AssertionError(f"collector not healthy after {timeout} s:\n{self.log()}")

    def _healthy(self) -> bool:
        probe = f"import urllib.request; urllib.request.urlopen('{self.url}/healthz', timeout=2)"
        if self.netns:  # the collector's loopback is the namespace's own
            return subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", probe],
                                  capture_output=True, timeout=10).returncode == 0
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(15)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def local_ids(db: Path) -> list[str]:
    """Result ids in the agent's own SQLite store (read beside a running agent: WAL)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM probe_results")]


def outbox_ids(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return [r[0] for r in conn.execute("SELECT result_id FROM outbox ORDER BY seq")]


def collected_ids(db_url: str, agent_id: str) -> list[str]:
    async def read() -> list[str]:
        store = await open_store(db_url, upgrade=False)
        try:
            return [r.id for r in await store.results(agent_id)]
        finally:
            await store.close()

    return asyncio.run(read())


def wait_for(cond: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def assert_exactly_once(local: Sequence[str], collected: Sequence[str]) -> None:
    assert len(collected) == len(set(collected)), "a round stored twice"
    missing = set(local) - set(collected)
    extra = set(collected) - set(local)
    assert not missing and not extra, (sorted(missing)[:5], sorted(extra)[:5])


LAB_UPLINK_AGENT = """
[agent]
id = "{agent_id}"
region = "cn-east"
isp = "telecom"
timezone = "{zone}"

[storage]
url = "sqlite:///{db}"

[probes.icmp]
every = "1s"
count = {count}
interval = "0.05s"
timeout = "0.5s"

[[targets]]
id = "hk-cn2"
host = "hk.lab"
datacenter = "hk"
line = "cn2-gia"
probes = ["icmp"]

[[targets]]
id = "tokyo-163"
host = "tokyo.lab"
datacenter = "tokyo"
line = "163"
probes = ["icmp"]

[uplink]
url = "{url}"
token_file = "{token}"
batch = {batch}
retry_max = "1s"
"""


def lab_uplink_agent(agent_id: str, db: Path, token: Path, *, url: str = "http://127.0.0.1:8471",
                     zone: str = "Asia/Shanghai", count: int = 3, batch: int = 5) -> str:
    """An agent config for the lab's hk and tokyo routes (icmp every second) uploading to `url`."""
    return LAB_UPLINK_AGENT.format(agent_id=agent_id, db=db, token=token, url=url, zone=zone, count=count,
                                   batch=batch)
