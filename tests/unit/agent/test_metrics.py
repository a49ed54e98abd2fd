"""The agent's exporter writes its per-target families itself: byte for byte what prometheus_client's
Histogram, Gauge and Counter wrote for the same rounds (the exporter before), _created series included."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from netprobe.agent.metrics import CONTENT_TYPE, LABELS, RTT_BUCKETS, Metrics, _go
from netprobe.agent.uplink import UplinkStats
from netprobe.probes.base import ProbeTarget
from netprobe.sinks.metrics import Family, sink_families
from netprobe.store import parse_envelope
from netprobe.store.events import route_of_envelope
from tests.support.path_events import CN2, GT, mtr_envelope, t


class FamiliesCollector(Collector):
    """The sinks' families as they were, a prometheus_client collector."""

    def __init__(self, read: Callable[[], list[Family]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, doc, kind, labels, samples in self._read():
            family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(name, doc, labels=labels)
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family


class UplinkCollector(Collector):
    """The uplink's families as they were, a prometheus_client collector."""

    def __init__(self, stats: Any) -> None:
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


class Extra(Collector):
    """A collector registered later (as the agent adds the alerts')."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("netprobe_alerts_firing", "Alerts firing after the last evaluation", value=2)


class Reference:
    """The exporter as it was, on prometheus_client's metric classes."""

    def __init__(self, sink_stats: Any, uplink_stats: Any) -> None:
        self.registry = r = CollectorRegistry()
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
        self.paths = Counter("netprobe_path_changes", "Traced paths (hop sequence) that differ from the "
                             "round before (mtr: forward, rmtr: return)", LABELS, registry=r)
        self.hashes: dict[tuple[str, ...], str] = {}
        r.register(FamiliesCollector(lambda: sink_families(sink_stats(), "netprobe_")))
        r.register(UplinkCollector(uplink_stats))

    def observe(self, target: Any, env: Any) -> None:
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
        for v in env.samples_ms:
            hist.observe(v / 1000.0)
        route = route_of_envelope(env)
        if route is not None:
            before = self.hashes.get(labels)
            self.hashes[labels] = route.hash
            self.paths.labels(*labels).inc(0 if before in (None, route.hash) else 1)


def rounds(seed: int, n: int) -> list[tuple[Any, Any]]:
    rnd = random.Random(seed)
    targets = [SimpleNamespace(id=f"t{i}", datacenter=rnd.choice(["hk", 'we"ird\\dc\nx', None]),
                               line=rnd.choice(["cn2", "163", None, "über"])) for i in range(6)]
    edges = [b * 1000 for b in RTT_BUCKETS]      # samples exactly on a bucket's bound (le is inclusive)
    out = []
    for _ in range(n):
        status = rnd.choice(["ok", "ok", "ok", "error", "timeout"])
        samples = [rnd.choice(edges) if rnd.random() < 0.2 else rnd.uniform(0.01, 2500)
                   for _ in range(rnd.randrange(0, 12))]
        env = SimpleNamespace(
            probe=rnd.choice(["icmp", "tcp", "mtr", "sse"]), status=status,
            started_at=datetime.fromtimestamp(1.7e9 + rnd.uniform(0, 1e6), UTC),
            result=(None if rnd.random() < 0.3
                    else SimpleNamespace(error_kind=rnd.choice([None, "dns", "refused"]))),
            loss_pct=rnd.choice([None, 0.0, 12.5, 100.0]), sent=rnd.choice([0, 10]),
            jitter_ms=rnd.choice([None, 0.0, rnd.uniform(0, 50)]), samples_ms=samples, target={})
        out.append((rnd.choice(targets), env))
    return out


@pytest.mark.parametrize("created", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_text_is_prometheus_clients(monkeypatch: pytest.MonkeyPatch, seed: int, created: bool) -> None:
    monkeypatch.setattr(time, "time", lambda: 1764681234.567891)       # the series' _created
    monkeypatch.setattr(prometheus_metrics, "_use_created", created)
    stats = {"store": {"queued": 3, "dropped": 0, "failures": 1, "written": 99},
             "influx": {"queued": 0, "dropped": 12345678, "failures": 0, "written": 5}}
    uplink = UplinkStats(depth=7, sent=1_234_567, duplicates=2, failures={"timeout": 3, "http_503": 1},
                         last_success=1764681234.5)
    mine, ref = Metrics(lambda: stats, lambda: uplink), Reference(lambda: stats, lambda: uplink)
    assert mine.text() == generate_latest(ref.registry)               # no series yet
    for i, (target, env) in enumerate(rounds(seed, 400)):
        mine.observe(target, env)
        ref.observe(target, env)
        if i % 97 == 0:
            uplink.sent += i
            assert mine.text() == generate_latest(ref.registry)
    assert mine.text() == generate_latest(ref.registry)
    mine.add(lambda: [("netprobe_alerts_firing", "Alerts firing after the last evaluation", "gauge", (),
                       [((), 2)])])
    ref.registry.register(Extra())
    assert mine.text() == generate_latest(ref.registry)


def test_path_changes_count_rounds_whose_path_differs_from_the_round_before() -> None:
    mine, ref = Metrics(), Reference(lambda: {}, lambda: UplinkStats())
    target = ProbeTarget(id="hk-cn2", host="198.18.0.2", datacenter="hk", line="cn2-gia")
    for i, trace in enumerate([CN2, CN2, GT, GT, CN2]):
        env = parse_envelope(mtr_envelope(t(i), trace))
        mine.observe(target, env)
        ref.observe(target, env)
    line = 'netprobe_path_changes_total{datacenter="hk",line="cn2-gia",probe="mtr",target="hk-cn2"} 2.0'
    assert line in mine.text().decode()
    assert f"{line}\n" in generate_latest(ref.registry).decode()


def test_numbers_are_written_as_prometheus_client_writes_them() -> None:
    rnd = random.Random(5)
    values = [0.0, -0.0, 1.0, -1.0, 1e6, 999999.0, 1234567.0, 1e16, 1e-7, 0.1, 123456.789, float("inf"),
              float("-inf"), float("nan"), -1234567.0, 2**53, *(rnd.uniform(-1e9, 1e9) for _ in range(200)),
              *(rnd.expovariate(1e-3) for _ in range(200))]
    assert [_go(v) for v in values] == [floatToGoString(v) for v in values]


def test_content_type_is_prometheus_clients() -> None:
    assert CONTENT_TYPE == CONTENT_TYPE_LATEST


def test_the_agent_does_not_import_prometheus_client() -> None:
    code = ("import sys, netprobe.agent.metrics as m; m.Metrics(lambda: {}, None).text(); "
            "print(any(n.startswith('prometheus_client') for n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


async def _ask(port: int, request: bytes) -> bytes:
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


async def test_exporter_http() -> None:
    import asyncio
    import socket

    from netprobe.agent.metrics import Exporter

    metrics = Metrics()
    target = SimpleNamespace(id="t1", datacenter="hk", line="cn2")
    metrics.observe(target, SimpleNamespace(probe="icmp", status="ok", started_at=datetime.now(UTC),
                                            result=None, loss_pct=0.0, sent=10, jitter_ms=0.5,
                                            samples_ms=[12.0, 15.0]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exporter = Exporter(metrics)
    await exporter.start("127.0.0.1", port)
    try:
        ok = await _ask(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
        head, _, body = ok.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert f"Content-Type: {CONTENT_TYPE_LATEST}".encode() in head      # as the aiohttp handler sent
        assert f"Content-Length: {len(body)}".encode() in head and body == metrics.text()
        assert b'netprobe_rtt_seconds_count{datacenter="hk",line="cn2",probe="icmp",target="t1"} 2.0' in body
        assert (await _ask(port, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
        only_head = await _ask(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert only_head.startswith(b"HTTP/1.1 200 OK") and only_head.endswith(b"\r\n\r\n")
        assert (await _ask(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404 ")
        assert (await _ask(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405 ")
        assert (await _ask(port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        assert await _ask(port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 5000) == b""   # too long: closed
        # a client that sends half a request and stalls does not stop the others
        _, stalled = await asyncio.open_connection("127.0.0.1", port)
        stalled.write(b"GET /metr")
        assert (await _ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
    finally:
        await exporter.cleanup()
    stalled.close()
