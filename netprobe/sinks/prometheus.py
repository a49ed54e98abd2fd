"""Families of netprobe.sinks.metrics (the sinks', the alerts') as a prometheus_client collector (the
collector's registry)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from netprobe.sinks.metrics import Family


class FamiliesCollector(Collector):
    """The families `read` returns, read when scraped."""

    def __init__(self, read: Callable[[], list[Family]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, doc, kind, labels, samples in self._read():
            family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(name, doc, labels=labels)
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family
