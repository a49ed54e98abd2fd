"""Prometheus exporter of the agent (`[metrics] listen`): what each round measured, as it happens.

Names follow Prometheus conventions: `netprobe_` prefix, base units in the name (seconds, ratio),
counters end in `_total`. The registry is the agent's own (not the process-global default), served
on the agent's event loop (Exporter).
"""

from __future__ import annotations

import asyncio
import bisect
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from netprobe.probes.base import ProbeTarget
from netprobe.sinks.metrics import Family, SinkStats, sink_families
from netprobe.store.envelopes import Envelope
from netprobe.store.events import route_of_envelope

# prometheus_client's CONTENT_TYPE_LATEST (0.26): the text exposition format
CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"

# 1 ms … 1 s: the span of a route's RTT (loopback to trans-Pacific 163 at peak), denser where lines differ
RTT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25,
               0.3, 0.4, 0.5, 0.75, 1.0)
LABELS = ("target", "probe", "datacenter", "line")


def _uplink_families(s: Any) -> list[Family]:
    """The outbox and the uplink's counters (netprobe.agent.uplink.UplinkStats), read when scraped."""
    return [
        ("netprobe_outbox_depth", "Rounds waiting in the outbox for the collector", "gauge", (),
         [((), s.depth)]),
        ("netprobe_outbox_dropped", "Oldest rounds dropped at the outbox cap", "counter", (),
         [((), s.dropped)]),
        ("netprobe_uplink_results", "Rounds the collector acknowledged", "counter", ("outcome",),
         [(("accepted",), s.sent), (("duplicate",), s.duplicates)]),
        ("netprobe_uplink_rejected", "Rounds the collector refused (parked, kept)", "counter", (),
         [((), s.rejected)]),
        ("netprobe_uplink_errors", "Failed upload attempts by kind", "counter", ("kind",),
         [((kind,), n) for kind, n in sorted(s.failures.items())]),
        ("netprobe_uplink_last_success_timestamp_seconds",
         "Unix time of the last acknowledged upload (0: none yet)", "gauge", (), [((), s.last_success)]),
    ]


def _go(d: float) -> str:
    """A number as prometheus_client writes it (its floatToGoString: Go's float formatting)."""
    d = float(d)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:         # Go switches to exponents sooner than Python
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _render(out: list[str], family: Family) -> None:
    """A family read when scraped, as prometheus_client writes a custom collector's GaugeMetricFamily
    or CounterMetricFamily (without _created)."""
    name, doc, kind, labelnames, samples = family
    if kind == "counter":
        name += "_total"
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
    for labels, value in samples:
        out.append(f"{name}{_labels(labelnames, tuple(str(v) for v in labels))} {_go(value)}\n")


def _escape(value: str) -> str:
    """A label value as prometheus_client writes it (backslash, newline and double quote escaped)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{a="…",b="…"}`, sorted by name as prometheus_client's text exposition sorts them ("": none)."""
    if not names:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(zip(names, values, strict=True))) + "}"


def _created_enabled() -> bool:
    """prometheus_client's switch for `_created` series: its module's, when something in this process
    imported it (disable_created_metrics()), else PROMETHEUS_DISABLE_CREATED_SERIES as it reads it."""
    loaded = sys.modules.get("prometheus_client.metrics")
    if loaded is not None:
        return bool(getattr(loaded, "_use_created", True))
    return os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in ("true", "1", "t")


class _Family:
    """One metric family of per-target series: each series' sample lines are written from strings made
    once, when the series first appears (prometheus_client builds a Sample and formats its labels for
    every sample of every scrape, most of a scrape's CPU at fleet sizes)."""

    def __init__(self, name: str, doc: str, kind: str, labelnames: tuple[str, ...]) -> None:
        self.name = name
        self.doc = doc.replace("\\", r"\\").replace("\n", r"\n")
        self.kind = kind
        self.labelnames = labelnames
        self.sample = f"{name}_total" if kind == "counter" else name    # its samples' name
        self.header = f"# HELP {self.sample} {self.doc}\n# TYPE {self.sample} {kind}\n"


class Scalars(_Family):
    """A gauge's series (set) or a counter's (inc), each with its `_created` line (written for counters)."""

    def __init__(self, name: str, doc: str, kind: str, labelnames: tuple[str, ...]) -> None:
        super().__init__(name, doc, kind, labelnames)
        self.series: dict[tuple[str, ...], list[Any]] = {}   # labels → [line prefix, created line, value]

    def _series(self, labels: tuple[str, ...]) -> list[Any]:
        s = self.series.get(labels)
        if s is None:
            lab = _labels(self.labelnames, labels)
            created = f"{self.name}_created{lab} {_go(time.time())}\n"
            s = self.series[labels] = [f"{self.sample}{lab} ", created, 0.0]
        return s

    def set(self, labels: tuple[str, ...], value: float) -> None:
        self._series(labels)[2] = float(value)

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        """Add `amount` (0: the series appears, at 0)."""
        self._series(labels)[2] += amount

    def render(self, out: list[str], created: bool) -> None:
        out.append(self.header)
        out.extend(f"{prefix}{_go(v)}\n" for prefix, _, v in self.series.values())
        if created and self.kind == "counter" and self.series:
            out.append(f"# HELP {self.name}_created {self.doc}\n# TYPE {self.name}_created gauge\n")
            out.extend(line for _, line, _ in self.series.values())


class _Histogram:
    """One series of a histogram: bucket counts (not cumulative), sum, and its lines' prefixes."""

    __slots__ = ("buckets", "created", "prefixes", "sum")

    def __init__(self, prefixes: list[str], created: str) -> None:
        self.prefixes = prefixes          # each bucket's, then _count's and _sum's
        self.created = created
        self.buckets = [0.0] * (len(prefixes) - 2)
        self.sum = 0.0


class Histograms(_Family):
    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...], buckets: tuple[float, ...]) -> None:
        super().__init__(name, doc, "histogram", labelnames)
        self.bounds = (*(float(b) for b in buckets), math.inf)
        self.series: dict[tuple[str, ...], _Histogram] = {}

    def child(self, labels: tuple[str, ...]) -> _Histogram:
        h = self.series.get(labels)
        if h is None:
            names = (*self.labelnames, "le")
            prefixes = [f"{self.name}_bucket{_labels(names, (*labels, _go(b)))} "
                        for b in self.bounds]
            lab = _labels(self.labelnames, labels)
            prefixes += [f"{self.name}_count{lab} ", f"{self.name}_sum{lab} "]
            h = self.series[labels] = _Histogram(
                prefixes, f"{self.name}_created{lab} {_go(time.time())}\n")
        return h

    def observe(self, h: _Histogram, value: float) -> None:
        h.sum += value
        h.buckets[bisect.bisect_left(self.bounds, value)] += 1.0

    def render(self, out: list[str], created: bool) -> None:
        out.append(self.header)
        for h in self.series.values():
            acc = 0.0
            prefixes = h.prefixes
            for i, n in enumerate(h.buckets):
                acc += n
                out.append(f"{prefixes[i]}{_go(acc)}\n")
            out.append(f"{prefixes[-2]}{_go(acc)}\n")
            out.append(f"{prefixes[-1]}{_go(h.sum)}\n")
        if created and self.series:
            out.append(f"# HELP {self.name}_created {self.doc}\n# TYPE {self.name}_created gauge\n")
            out.extend(h.created for h in self.series.values())


def exposition(kept: Iterable[Histograms | Scalars], read: Iterable[Callable[[], list[Family]]]) -> bytes:
    """The text of /metrics: the families kept, then those read now (the agent's and the collector's)."""
    out: list[str] = []
    created = _created_enabled()
    for family in kept:
        family.render(out, created)
    for families in read:
        for fixed in families():
            _render(out, fixed)
    return "".join(out).encode()


class Metrics:
    """Every family is written here in prometheus_client's text exposition format, byte for byte
    (tests/unit/agent/test_metrics.py compares the two), without prometheus_client, which the daemon
    would otherwise keep in memory (30 modules, with http.server and wsgiref). The
    per-target families (Histograms, Scalars) are kept here, the sinks', the
    uplink's and those added with add() (the alerts') are read when scraped."""

    def __init__(self, sink_stats: SinkStats | None = None,
                 uplink_stats: Callable[[], Any] | None = None) -> None:
        self._read: list[Callable[[], list[Family]]] = []
        if sink_stats is not None:
            self._read.append(lambda: sink_families(sink_stats(), "netprobe_"))
        if uplink_stats is not None:
            self._read.append(lambda: _uplink_families(uplink_stats()))
        self.rtt = Histograms("netprobe_rtt_seconds", "Round-trip times of every answered request "
                              "(icmp, tcp connect, mtr destination) and sse first-event times", LABELS,
                              RTT_BUCKETS)
        self.loss = Scalars("netprobe_loss_ratio", "Loss of the last round, 0-1 (mtr: path loss)", "gauge",
                            LABELS)
        self.jitter = Scalars("netprobe_jitter_seconds", "Jitter of the last round (mean |ΔRTT|)", "gauge",
                              LABELS)
        self.rounds = Scalars("netprobe_rounds", "Probe rounds by status", "counter", (*LABELS, "status"))
        self.errors = Scalars("netprobe_probe_errors", "Failed rounds by error kind", "counter",
                              (*LABELS, "kind"))
        self.last = Scalars("netprobe_last_round_timestamp_seconds", "Unix time the last round started",
                            "gauge", LABELS)
        self.path_changes = Scalars("netprobe_path_changes", "Traced paths (hop sequence) that differ "
                                    "from the round before (mtr: forward, rmtr: return)", "counter", LABELS)
        self._paths: dict[tuple[str, ...], str] = {}      # labels → the last round's path hash
        self._families: tuple[Histograms | Scalars, ...] = (
            self.rtt, self.loss, self.jitter, self.rounds, self.errors, self.last, self.path_changes)

    def add(self, read: Callable[[], list[Family]]) -> None:
        """Families read when scraped, written after the uplink's."""
        self._read.append(read)

    def observe(self, target: ProbeTarget, env: Envelope) -> None:
        """One round of this agent's (the envelope it stores and uploads)."""
        labels = (str(target.id), str(env.probe), str(target.datacenter), str(target.line))
        self.rounds.inc((*labels, str(env.status)))
        self.last.set(labels, env.started_at.timestamp())
        if env.status != "ok":
            kind = env.result.error_kind if env.result is not None else None
            self.errors.inc((*labels, str(kind or env.status)))
        if env.loss_pct is not None and env.sent:
            self.loss.set(labels, env.loss_pct / 100.0)
        if env.jitter_ms is not None:
            self.jitter.set(labels, env.jitter_ms / 1000.0)
        hist = self.rtt.child(labels)
        for v in env.samples_ms:          # the answered ones
            self.rtt.observe(hist, v / 1000.0)
        route = route_of_envelope(env)    # traced rounds only; as the store's path_change events
        if route is not None:
            before = self._paths.get(labels)
            self._paths[labels] = route.hash
            self.path_changes.inc(labels, 0.0 if before in (None, route.hash) else 1.0)

    def text(self) -> bytes:
        return exposition(self._families, self._read)


class Exporter:
    """GET (or HEAD) /metrics over HTTP/1.x on the agent's event loop, one request per connection.

    The agent's own few lines of asyncio rather than aiohttp's server: aiohttp.web is 17 modules
    the daemon would keep for good for one route (the uplink and the sse probe do not use
    aiohttp either: netprobe.net.http1)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._client, host, port, limit=REQUEST_HEAD_MAX)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                writer.write(self._answer(head))
                await writer.drain()
        except (TimeoutError, OSError):
            pass
        finally:
            self._clients.discard(task)
            writer.close()

    def _answer(self, head: bytes) -> bytes:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return _response(400, b"Bad Request", b"400: Bad Request")
        method, path = parts[0], parts[1].split(b"?", 1)[0]
        if path != b"/metrics":
            return _response(404, b"Not Found", b"404: Not Found")
        if method not in (b"GET", b"HEAD"):
            return _response(405, b"Method Not Allowed", b"405: Method Not Allowed", b"Allow: GET, HEAD\r\n")
        body = self._metrics.text()
        return _response(200, b"OK", body, content_type=CONTENT_TYPE.encode(),
                         head_only=method == b"HEAD")

    async def cleanup(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.wait(self._clients, timeout=1.0)


REQUEST_HEAD_MAX = 16 * 1024    # bytes of request line and headers
REQUEST_TIMEOUT = 10.0          # a client gets this long to send its request and read the answer


def _response(status: int, reason: bytes, body: bytes, extra: bytes = b"", *,
              content_type: bytes = b"text/plain; charset=utf-8", head_only: bool = False) -> bytes:
    head = (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n"
            % (status, reason, content_type, len(body), extra))
    return head if head_only else head + body

