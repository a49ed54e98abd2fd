"""A real Alertmanager (Debian's `prometheus-alertmanager`), alone (no cluster), routing to nobody:
what it received is read back from its API v2."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import free_port, server

CONFIG = """route:
  receiver: nobody
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: nobody
"""


def binary() -> str | None:
    return shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


@contextlib.contextmanager
def alertmanager(data: Path) -> Iterator[str]:
    """Alertmanager on a free loopback port, its state in `data`; yields its URL once ready."""
    exe = binary()
    assert exe is not None, "prometheus-alertmanager is not installed (.ci/run installs it)"
    data.mkdir(parents=True, exist_ok=True)
    config = data / "alertmanager.yml"
    config.write_text(CONFIG)
    port = free_port()
    argv = [exe, f"--config.file={config}", f"--storage.path={data / 'state'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    with server(argv, port, data / "alertmanager.log") as url:
        yield url
