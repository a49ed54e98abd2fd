"""netprobe.sinks.metrics' families as a prometheus_client collector (the collector's registry)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from netprobe.sinks.metrics import SinkStats, sink_families


class SinkCollector(Collector):
    """`<prefix>sink_queue_depth`, `_dropped`, `_errors` and `_written`, labelled by sink."""

    def __init__(self, stats: SinkStats, prefix: str) -> None:
        self._stats = stats
        self._prefix = prefix

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, doc, kind, labels, samples in sink_families(self._stats(), self._prefix):
            family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(name, doc, labels=labels)
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family
