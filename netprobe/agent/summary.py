"""What one agent run measured, read back from the database it wrote (quick start, demos)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from netprobe.config.agent import Config
from netprobe.stats import jitter, loss_pct, rtt_stats
from netprobe.store import Envelope, open_store
from netprobe.textout import Out, TextTable


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def summarise(envelopes: list[Envelope]) -> dict[str, Any]:
    """Pool the rounds' samples: loss over all requests, RTT figures over all received samples."""
    sent = received = 0
    samples: list[float] = []
    jitters: list[float] = []
    for env in envelopes:
        sent += env.sent
        received += env.received
        samples.extend(env.samples_ms)          # the received ones
        j = jitter(env.samples_ms)              # over consecutive received replies
        if j is not None:
            jitters.append(j)
    return {"rounds": len(envelopes), "sent": sent, "loss_pct": loss_pct(sent, received),
            "rtt": rtt_stats(samples), "jitter_ms": sum(jitters) / len(jitters) if jitters else None}


async def print_summary(cfg: Config, since: datetime, db_url: str | None) -> None:
    store = await open_store(db_url)
    try:
        table = TextTable(title=f"measured since {since:%H:%M:%S} UTC — read back from {store.display_url}")
        for col in ("target", "probe", "line", "rounds", "sent", "loss %", "p50 ms", "p95 ms", "avg ms",
                    "stdev ms", "jitter ms"):
            table.add_column(col, justify="left" if col in ("target", "probe", "line") else "right")
        for target, probe, _ in cfg.jobs():
            rows = await store.results(cfg.agent.id, target.id, probe, start=since)
            s = summarise([row.envelope for row in rows])
            rtt = s["rtt"]
            table.add_row(target.id, probe, target.line, str(s["rounds"]), str(s["sent"]),
                          _fmt(s["loss_pct"]), _fmt(rtt.p50 if rtt else None), _fmt(rtt.p95 if rtt else None),
                          _fmt(rtt.avg if rtt else None), _fmt(rtt.stdev if rtt else None),
                          _fmt(s["jitter_ms"]))
        Out().table(table)
    finally:
        await store.close()
