"""Prometheus exporter of the agent (`[metrics] listen`): what each round measured, as it happens.

Names follow Prometheus conventions: `netprobe_` prefix, base units in the name (seconds, ratio),
counters end in `_total`. The registry is the agent's own (not the process-global default), served
by aiohttp on the agent's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from netprobe.probes.base import ProbeTarget
from netprobe.sinks.metrics import SinkCollector, SinkStats
from netprobe.store.envelopes import Envelope

# 1 ms … 1 s: the span of a route's RTT (loopback to trans-Pacific 163 at peak), denser where lines differ
RTT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25,
               0.3, 0.4, 0.5, 0.75, 1.0)
LABELS = ("target", "probe", "datacenter", "line")


class _UplinkCollector(Collector):
    """The outbox and the uplink's counters (netprobe.agent.uplink.UplinkStats), read when scraped."""

    def __init__(self, stats: Callable[[], Any]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        s = self._stats()
        yield GaugeMetricFamily("netprobe_outbox_depth", "Rounds waiting in the outbox for the collector",
                                value=s.depth)
        yield CounterMetricFamily("netprobe_outbox_dropped", "Oldest rounds dropped at the outbox cap",
                                  value=s.dropped)
        sent = CounterMetricFamily("netprobe_uplink_results", "Rounds the collector acknowledged",
                                   labels=["outcome"])
        sent.add_metric(["accepted"], s.sent)
        sent.add_metric(["duplicate"], s.duplicates)
        yield sent
        yield CounterMetricFamily("netprobe_uplink_rejected", "Rounds the collector refused (parked, kept)",
                                  value=s.rejected)
        errors = CounterMetricFamily("netprobe_uplink_errors", "Failed upload attempts by kind",
                                     labels=["kind"])
        for kind, n in sorted(s.failures.items()):
            errors.add_metric([kind], n)
        yield errors
        yield GaugeMetricFamily("netprobe_uplink_last_success_timestamp_seconds",
                                "Unix time of the last acknowledged upload (0: none yet)",
                                value=s.last_success)


class Metrics:
    def __init__(self, sink_stats: SinkStats | None = None,
                 uplink_stats: Callable[[], Any] | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rtt = Histogram("netprobe_rtt_seconds", "Round-trip times of every answered request (icmp, tcp "
                             "connect, mtr destination) and sse first-event times", LABELS,
                             buckets=RTT_BUCKETS, registry=r)
        self.loss = Gauge("netprobe_loss_ratio", "Loss of the last round, 0-1 (mtr: path loss)", LABELS,
                          registry=r)
        self.jitter = Gauge("netprobe_jitter_seconds", "Jitter of the last round (mean |ΔRTT|)", LABELS,
                            registry=r)
        self.rounds = Counter("netprobe_rounds", "Probe rounds by status", (*LABELS, "status"), registry=r)
        self.errors = Counter("netprobe_probe_errors", "Failed rounds by error kind", (*LABELS, "kind"),
                              registry=r)
        self.last = Gauge("netprobe_last_round_timestamp_seconds", "Unix time the last round started",
                          LABELS, registry=r)
        if sink_stats is not None:
            r.register(SinkCollector(sink_stats, "netprobe_"))
        if uplink_stats is not None:
            r.register(_UplinkCollector(uplink_stats))

    def observe(self, target: ProbeTarget, env: Envelope) -> None:
        """One round of this agent's (the envelope it stores and uploads)."""
        labels = (target.id, env.probe, target.datacenter, target.line)
        self.rounds.labels(*labels, env.status).inc()
        self.last.labels(*labels).set(env.started_at.timestamp())
        if env.status != "ok":
            kind = env.result.error_kind if env.result is not None else None
            self.errors.labels(*labels, kind or env.status).inc()
        if env.loss_pct is not None and env.sent:
            self.loss.labels(*labels).set(env.loss_pct / 100.0)
        if env.jitter_ms is not None:
            self.jitter.labels(*labels).set(env.jitter_ms / 1000.0)
        hist = self.rtt.labels(*labels)
        for v in env.samples_ms:          # the answered ones
            hist.observe(v / 1000.0)

    def text(self) -> bytes:
        return generate_latest(self.registry)


async def serve(metrics: Metrics, host: str, port: int) -> web.AppRunner:
    """GET /metrics on host:port; the caller cleans the runner up on shutdown."""

    async def handle(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.text(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
