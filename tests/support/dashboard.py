"""A collector with its dashboard on, and viewers, for the dashboard's tests."""

from __future__ import annotations

import base64
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from netprobe.dashboard.layout import e, href
from netprobe.dashboard.target import SPANS
from tests.support.collector import CLI


def dashboard_config(path: Path, db_url: str, listen: str, prefix: str = "/", refresh: str = "60s") -> Path:
    path.write_text(f'[collector]\nlisten = "{listen}"\n\n[storage]\nurl = "{db_url}"\n\n'
                    f'[dashboard]\nenabled = true\nprefix = "{prefix}"\nrefresh = "{refresh}"\n')
    return path


def add_viewer(config: Path, name: str) -> str:
    """`netprobe collector add-viewer NAME`: its secret, the last line of stdout."""
    out = subprocess.run([*CLI, "collector", "add-viewer", name, "--config", str(config)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return out.strip().splitlines()[-1]


def basic(name: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{secret}".encode()).decode()


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    text: str


def fetch(url: str, auth: str | None = None, method: str = "GET", body: bytes | None = None,
          headers: dict[str, str] | None = None) -> Answer:
    sent = {**(headers or {}), **({"Authorization": auth} if auth else {})}
    req = urllib.request.Request(url, method=method, data=body, headers=sent)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Answer(resp.status, dict(resp.headers.items()), resp.read().decode())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, dict(exc.headers.items()), exc.read().decode())


def span_links(base: str, parts: Iterable[str], current: int) -> str:
    """A span selector of plain links, the current span marked, each link made by layout.href."""
    path = tuple(parts)
    links = [f'<a href="{e(href(base, *path, days=d))}"{" class=here" if d == current else ""}>'
             f'{d} day{"s" * (d != 1)}</a>' for d in SPANS]
    return f'<p class="spans">Span: {" ".join(links)}</p>'
