"""The collector's own Prometheus metrics (GET /metrics).

Names: `netprobe_collector_` prefix, base units in the name (seconds, ratio), counters end in `_total`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from netprobe.agent.metrics import Histograms, Scalars, exposition
from netprobe.sinks.metrics import Family, SinkStats, sink_families

REASONS = ("unauthorized", "forbidden", "bad_json", "bad_encoding", "bad_envelope", "too_large", "storage",
           "bad_header")
# 1 ms … 30 s: one small batch on a local database up to a full batch on a busy one
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ROUND_LABELS = ("agent", "target", "probe")

def round_rtt_ms(result: Mapping[str, Any]) -> float | None:
    """The round's typical RTT: icmp/mtr rtt_ms.p50, tcp connect_ms.p50, sse first_event_ms."""
    for key in ("rtt_ms", "connect_ms"):
        stats = result.get(key)
        if isinstance(stats, Mapping):
            p50 = _number(stats.get("p50"))
            if p50 is not None:
                return p50
    return _number(result.get("first_event_ms"))


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


class CollectorMetrics:
    """Written as the agent's exporter writes its own (netprobe.agent.metrics): the collector's families,
    then the sinks' and those added with add() (the alerts'), read when scraped."""

    def __init__(self, sink_stats: SinkStats | None = None) -> None:
        p = "netprobe_collector_"
        self.requests = Scalars(f"{p}ingest_requests", "POST /api/v1/results requests by HTTP status",
                                "counter", ("code",))
        self.rejected = Scalars(f"{p}rejected_requests", "Ingest requests refused, by reason", "counter",
                                ("reason",))
        for reason in REASONS:
            self.rejected.inc((reason,), 0.0)
        self.accepted = Scalars(f"{p}results_accepted", "Result envelopes newly stored", "counter",
                                ("agent",))
        self.duplicates = Scalars(f"{p}results_duplicate", "Result envelopes already stored (replays)",
                                  "counter", ("agent",))
        self.expired = Scalars(f"{p}results_expired", "Result envelopes older than retention, dropped",
                               "counter", ("agent",))
        self.latency = Histograms(f"{p}ingest_duration_seconds", "Time to answer POST /api/v1/results", (),
                                  LATENCY_BUCKETS)
        self._latency = self.latency.child(())
        self.loss = Scalars(f"{p}last_loss_ratio", "Loss of the newest round received, 0-1 (mtr: path loss)",
                            "gauge", ROUND_LABELS)
        self.rtt = Scalars(f"{p}last_rtt_seconds", "Typical RTT of the newest round received (icmp/mtr rtt "
                           "p50, tcp connect p50, sse first event); NaN when nothing answered", "gauge",
                           ROUND_LABELS)
        self.last = Scalars(f"{p}last_round_timestamp_seconds", "Unix time the newest round received started",
                            "gauge", ROUND_LABELS)
        self._newest: dict[tuple[str, str, str], datetime] = {}
        self._read: list[Callable[[], list[Family]]] = []
        if sink_stats is not None:
            self._read.append(lambda: sink_families(sink_stats(), p))

    def add(self, read: Callable[[], list[Family]]) -> None:
        """Families read when scraped, written after the sinks'."""
        self._read.append(read)

    def answered(self, status: int, seconds: float) -> None:
        """One POST /api/v1/results answered."""
        self.requests.inc((str(status),))
        self.latency.observe(self._latency, seconds)

    def reject(self, reason: str) -> None:
        self.rejected.inc((reason,))

    def stored(self, agent_id: str, accepted: int, duplicates: int, expired: int) -> None:
        self.accepted.inc((agent_id,), accepted)
        self.duplicates.inc((agent_id,), duplicates)
        self.expired.inc((agent_id,), expired)

    def rounds(self, envelopes: Sequence[Mapping[str, Any]]) -> None:
        """Gauges from a stored batch: per agent × target × probe, the newest round wins (replays of
        older rounds do not move them back)."""
        # The batch's newest round of each series first (the first of equal ones, as one by one), then
        # the gauges once per series rather than once per round: the same values, far fewer calls.
        newest: dict[tuple[str, str, str], tuple[datetime, Any]] = {}
        for env in envelopes:
            try:
                key = (str(env["agent"]["id"]), str(env["target"]["id"]), str(env["probe"]))
                started = datetime.fromisoformat(str(env["started_at"]).replace("Z", "+00:00"))
                result = env["result"]
            except (KeyError, TypeError, ValueError):
                continue    # Store.write validated the batch; nothing here should be skipped
            known = newest.get(key)
            if known is None or started > known[0]:
                newest[key] = (started, result)
        for key, (started, result) in newest.items():
            if key in self._newest and started <= self._newest[key]:
                continue
            self._newest[key] = started
            self.last.set(key, started.timestamp())
            loss = _number(result.get("loss_pct"))
            if loss is not None and result.get("sent"):
                self.loss.set(key, loss / 100.0)
            rtt = round_rtt_ms(result)
            self.rtt.set(key, rtt / 1000.0 if rtt is not None else math.nan)

    def text(self) -> bytes:
        return exposition((self.requests, self.rejected, self.accepted, self.duplicates, self.expired,
                           self.latency, self.loss, self.rtt, self.last), self._read)
