"""The pipeline's sinks on /metrics, for the agent's exporter and the collector's alike: queue depth
and counters of each sink, read from Pipeline.stats when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

SinkStats = Callable[[], Mapping[str, Mapping[str, int]]]


class SinkCollector(Collector):
    """`<prefix>sink_queue_depth`, `_dropped`, `_errors` and `_written`, labelled by sink."""

    def __init__(self, stats: SinkStats, prefix: str) -> None:
        self._stats = stats
        self._prefix = prefix

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        p = f"{self._prefix}sink_"
        depth = GaugeMetricFamily(f"{p}queue_depth", "Results queued for a sink", labels=["sink"])
        dropped = CounterMetricFamily(f"{p}dropped", "Results dropped by a full sink queue", labels=["sink"])
        errors = CounterMetricFamily(f"{p}errors", "Failed sink writes (retried)", labels=["sink"])
        written = CounterMetricFamily(f"{p}written", "Results written by a sink", labels=["sink"])
        for sink, s in sorted(self._stats().items()):
            depth.add_metric([sink], s.get("queued", 0))
            dropped.add_metric([sink], s.get("dropped", 0))
            errors.add_metric([sink], s.get("failures", 0))
            written.add_metric([sink], s.get("written", 0))
        yield from (depth, dropped, errors, written)
