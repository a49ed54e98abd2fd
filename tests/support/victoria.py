"""VictoriaMetrics on loopback (it speaks the InfluxDB v2 write API) and reading back what was written."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def victoria_metrics(data: Path) -> Iterator[str]:
    """VictoriaMetrics on a free loopback port (it speaks the InfluxDB v2 write API); yields its URL."""
    port = _free_port()
    proc = subprocess.Popen(["victoria-metrics", f"-httpListenAddr=127.0.0.1:{port}",
                             f"-storageDataPath={data}", "-search.latencyOffset=0s", "-retentionPeriod=100y"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _export(url: str, match: str) -> list[dict[str, object]]:
    urllib.request.urlopen(f"{url}/internal/force_flush", timeout=5).read()
    q = urllib.parse.urlencode({"match[]": match, "start": "0"})
    body = urllib.request.urlopen(f"{url}/api/v1/export?{q}", timeout=5).read().decode()
    return [json.loads(line) for line in body.splitlines() if line.strip()]
