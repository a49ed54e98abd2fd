"""The pipeline's sinks on /metrics, for the agent's exporter and the collector's alike: queue depth
and counters of each sink, read from Pipeline.stats when scraped. Plain data here, written by
netprobe.agent.metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping

SinkStats = Callable[[], Mapping[str, Mapping[str, int]]]
# name, help, type (gauge or counter; a counter's name without _total), label names, (label values, value)
Family = tuple[str, str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]


def sink_families(stats: Mapping[str, Mapping[str, int]], prefix: str) -> list[Family]:
    """`<prefix>sink_queue_depth`, `_dropped`, `_errors` and `_written`, labelled by sink."""
    p = f"{prefix}sink_"
    rows = sorted(stats.items())
    return [
        (f"{p}queue_depth", "Results queued for a sink", "gauge", ("sink",),
         [((sink,), s.get("queued", 0)) for sink, s in rows]),
        (f"{p}dropped", "Results dropped by a full sink queue", "counter", ("sink",),
         [((sink,), s.get("dropped", 0)) for sink, s in rows]),
        (f"{p}errors", "Failed sink writes (retried)", "counter", ("sink",),
         [((sink,), s.get("failures", 0)) for sink, s in rows]),
        (f"{p}written", "Results written by a sink", "counter", ("sink",),
         [((sink,), s.get("written", 0)) for sink, s in rows]),
    ]
