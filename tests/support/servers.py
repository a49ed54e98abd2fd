"""A monitoring server (Prometheus, Alertmanager) as a child process on a free loopback port, with its
data in a directory of its own: started, waited for until ready, stopped."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.victoria import _free_port


@contextlib.contextmanager
def server(argv: Sequence[str], port: int, log: Path, ready: str = "/-/ready",
           timeout: float = 30.0) -> Iterator[str]:
    """`argv` (listening on 127.0.0.1:`port`) until the block ends; yields its URL once `ready` answers."""
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                text = log.read_text(errors="replace")
                raise AssertionError(f"{argv[0]} exited {proc.returncode}:\n{text}")
            try:
                urllib.request.urlopen(url + ready, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{argv[0]} not ready after {timeout} s:\n"
                                         f"{log.read_text(errors='replace')}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def get_json(url: str, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}{path}{query}", timeout=10) as resp:
        return json.loads(resp.read())


def prom_query(url: str, expr: str) -> list[dict[str, Any]]:
    """An instant PromQL query (Prometheus' or VictoriaMetrics' /api/v1/query): its result vector."""
    body = get_json(url, "/api/v1/query", query=expr)
    assert body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def free_port() -> int:
    return _free_port()
