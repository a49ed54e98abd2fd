"""The route's network floor from an agent's stored data: the evening-peak RTT of the stored target
whose host (or sse_url's host) is the endpoint's. A warm keep-alive request costs one round trip,
so TTFT − RTT P50 is what is left to the server (queue + prefill + first token)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from netprobe.errors import UsageError


@dataclass(frozen=True, slots=True)
class Floor:
    target: str
    agent: str
    rtt_p50_ms: float
    rtt_p95_ms: float | None
    rounds: int
    window: str
    days: int

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "agent": self.agent, "rtt_p50_ms": self.rtt_p50_ms,
                "rtt_p95_ms": self.rtt_p95_ms, "rounds": self.rounds, "window": self.window,
                "days": self.days, "subtracted": "rtt_p50_ms"}


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


async def floors(db: str, urls: list[str], days: int, window: str) -> dict[str, Floor | str]:
    """Per endpoint URL its Floor, or why there is none."""
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.fleet import load_target_options
    from netprobe.store.source import open_source
    from netprobe.store.urls import sqlite_file

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    path = sqlite_file(db)
    if path is not None and not path.exists():   # opening would create an empty file: a typo
        raise UsageError(f"--db: no such database file {path}")
    store = await open_source(db)
    try:
        targets = await load_target_options(store)
        rows = await peak_rows(store, days, win, peak_only=True)
    finally:
        await store.close()
    out: dict[str, Floor | str] = {}
    for url in urls:
        host = _host(url)
        ids = {t.id for t in targets if (t.host or "").strip("[]").lower() == host
               or _host(str(t.options.get("sse_url") or "")) == host}
        found = [r for r in rows if r.target in ids and r.peak.rtt_p50_ms is not None]
        if not found:
            out[url] = (f"no stored target with host {host}" if not ids
                        else f"no evening-peak ({win.label}) RTT for {host} in the last {days} days")
            continue
        best = max(found, key=lambda r: r.peak.rounds)   # several agents or targets: the best measured
        p50 = best.peak.rtt_p50_ms
        assert p50 is not None
        out[url] = Floor(best.target, best.agent, p50, best.peak.rtt_p95_ms, best.peak.rounds, win.label,
                         days)
    return out
