"""sse probe: one streamed response timed as a user's browser receives it — first event, the gaps
between events (the stutter users see), stalls, and in emitter mode how much the route delays each
event compared with when the server sent it."""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from netprobe.config.base import HttpUrl
from netprobe.config.durations import Duration
from netprobe.errors import SetupError
from netprobe.probes.base import (
    ProbeContext,
    ProbeRuntime,
    ProbeTarget,
    TargetOption,
)
from netprobe.probes.results import ProbeResult, count_problems
from netprobe.probes.settings import ProbeSettings
from netprobe.probes.sse import metrics
from netprobe.probes.sse.parser import SseComment, SseEvent
from netprobe.stats import percentile
from netprobe.times import utc_now

if TYPE_CHECKING:
    # the client only when a stream is read: the registry, and with it the store, the report and the
    # collector, load this module to know the probe, not to run it.
    from netprobe.probes.sse.client import Capture, Limits


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value  # TOML arrays are lists; strict wants tuples


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    role: Literal["system", "user", "assistant"] = "user"
    content: str


class SseSettings(ProbeSettings):
    every: Duration = Field(default=300.0, gt=0, description="how often a stream is read")
    timeout: Duration = Field(default=30.0, gt=0, description="cap on one whole exchange, connect included")
    connect_timeout: Duration = Field(default=10.0, gt=0, description="cap on DNS + connect (+ TLS)")
    idle_timeout: Duration = Field(default=10.0, gt=0, description="no byte for this long ends it: stalled")
    mode: Literal["emitter", "openai"] = Field(default="emitter", description="what the URL serves")
    stall_ms: float = Field(default=250.0, gt=0, description="a gap above this (and above stall_k × "
                            "the running median gap) is a stall")
    stall_k: float = Field(default=4.0, ge=1, description="stall threshold as a multiple of the median gap")
    max_event_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30, description="cap on one event")
    max_total_bytes: int = Field(default=64 << 20, ge=1024, le=1 << 34, description="cap on one stream")
    # openai mode
    model: str = Field(default="deepseek-chat", min_length=1, description="openai: request's model")
    messages: Annotated[tuple[Message, ...], BeforeValidator(_as_tuple)] = Field(
        default=(Message(content="Say hello in one short sentence."),), min_length=1,
        description="openai: request's messages")
    max_tokens: int = Field(default=64, ge=1, le=100_000, description="openai: request's max_tokens")
    api_key_file: str = Field(default="", description="openai: file holding the API key (never logged)")
    api_key_env: str = Field(default="", description="openai: environment variable holding the API key")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="openai: more request body keys")

    def round_seconds(self) -> float:
        return self.timeout

    def limits(self) -> Limits:
        from netprobe.probes.sse.client import Limits

        return Limits(total_s=self.timeout, connect_s=self.connect_timeout, idle_s=self.idle_timeout,
                      max_event_bytes=self.max_event_bytes, max_total_bytes=self.max_total_bytes)


@dataclass(slots=True)
class SseResult(ProbeResult):
    """One streamed response, timed the way a browser receives it (docs/numbers.md sse).

    `samples_ms` holds the one first-event time, so hourly rollups and percentiles of first-event
    time come out of the same sketch as icmp RTTs; `sent`/`received` count the stream as one request.
    """

    mode: str = "emitter"
    url: str = ""
    http_status: int | None = None
    dns_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    ttfb_ms: float | None = None          # request written -> response headers
    first_event_ms: float | None = None   # request written -> first content event
    first_reasoning_ms: float | None = None  # openai: first reasoning_content token
    first_content_ms: float | None = None    # openai: first content token
    events: int = 0                       # content events (tokens in openai mode)
    comments: int = 0
    gaps_ms: dict[str, float] | None = None
    stalls: int = 0
    stall_ms_total: float = 0.0
    delay_var_ms: dict[str, float] | None = None
    tpot_ms: float | None = None
    tokens: dict[str, int] | None = None  # openai: from `usage` when the server sends it
    duration_s: float = 0.0               # request written -> end of stream
    bytes: int = 0
    reused_connection: bool = False       # always: one fresh connection per stream (sse.client)
    content_encoding: str | None = None
    content_type: str | None = None
    completed: bool = False
    sent: int = 0
    received: int = 0
    loss_pct: float = 0.0
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)

    @classmethod
    def json_problems(cls, result: Mapping[str, Any]) -> list[str]:
        # a stream cut after its first event keeps that time, but was not received whole
        return count_problems(result, answers_are_received=False)

    def to_dict(self) -> dict[str, Any]:
        return self.fields_dict()


def check_url(url: str) -> str:
    """http(s) URLs only: anything else is bad input, said before anything is sent."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    return url


class _Emitter:
    """`netprobe target` events: data is JSON with `seq` and the server's send time `ts`."""

    def __init__(self) -> None:
        self.times_ns: list[int] = []
        self.server_ms: list[float] = []
        self.problem: str | None = None

    def on_event(self, ev: SseEvent) -> bool:
        try:
            data = json.loads(ev.data)
            ts = float(data["ts"])
        except (ValueError, KeyError, TypeError):
            self.problem = f"event {len(self.times_ns)}: data is not emitter JSON with seq and ts"
            return True
        self.times_ns.append(ev.t_ns)
        self.server_ms.append(ts * 1000.0)
        return False


class OpenAiChunks:
    """OpenAI-compatible chunks: role-only, usage-only and finish chunks carry no token."""

    def __init__(self) -> None:
        self.times_ns: list[int] = []        # every token, reasoning or content, in order
        self.first_reasoning_ns: int | None = None
        self.first_content_ns: int | None = None
        self.tokens: dict[str, int] | None = None
        self.problem: str | None = None

    def on_event(self, ev: SseEvent) -> bool:
        if ev.data.strip() == "[DONE]":
            return True
        try:
            chunk = json.loads(ev.data)
        except ValueError:
            self.problem = f"chunk {len(self.times_ns)}: data is not JSON"
            return True
        if not isinstance(chunk, dict):
            self.problem = "a chunk is not a JSON object"
            return True
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.tokens = {k: int(v) for k, v in usage.items() if isinstance(v, int)}
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            if delta.get("reasoning_content"):
                self.first_reasoning_ns = self.first_reasoning_ns or ev.t_ns
                self.times_ns.append(ev.t_ns)
            if delta.get("content"):
                self.first_content_ns = self.first_content_ns or ev.t_ns
                if not delta.get("reasoning_content"):
                    self.times_ns.append(ev.t_ns)
        return False


def api_key(settings: SseSettings) -> str | None:
    if settings.api_key_file:
        try:
            return Path(settings.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SetupError(f"sse api_key_file {settings.api_key_file}: {exc.strerror or exc}") from None
    if settings.api_key_env:
        value = os.environ.get(settings.api_key_env)
        if not value:
            raise SetupError(f"sse api_key_env: ${settings.api_key_env} is not set")
        return value
    return None


async def run(target: ProbeTarget, settings: SseSettings, ctx: ProbeContext) -> SseResult:
    return await read_stream(target, settings)


async def read_stream(target: ProbeTarget, settings: SseSettings, key: str | None = None) -> SseResult:
    """One exchange on a fresh connection; every failure of the network or the server is a classified
    result."""
    from netprobe.probes.sse.client import stream

    url = target.url or target.host
    started = utc_now()
    t0 = time.monotonic()
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity", "Cache-Control": "no-cache"}
    interp: _Emitter | OpenAiChunks
    comments = 0

    def on_comment(_c: SseComment) -> None:
        nonlocal comments
        comments += 1

    if settings.mode == "openai":
        key = key if key is not None else api_key(settings)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body: Any = {"model": settings.model, "messages": [m.model_dump() for m in settings.messages],
                     "max_tokens": settings.max_tokens, "stream": True,
                     "stream_options": {"include_usage": True}, **settings.extra_body}
        interp, method = OpenAiChunks(), "POST"
    else:
        interp, method, body = _Emitter(), "GET", None
    cap = await stream(method, url, headers=headers, body=body, limits=settings.limits(),
                       on_event=interp.on_event, on_comment=on_comment)
    if interp.problem is not None and cap.error_kind is None:
        cap.error_kind, cap.error, cap.completed = "malformed", interp.problem, False
    return _result(target, settings, started, t0, cap, interp, comments)


def _result(target: ProbeTarget, settings: SseSettings, started: Any, t0: float, cap: Capture,
            interp: _Emitter | OpenAiChunks, comments: int) -> SseResult:
    times = [cap.ms_after_written(t) or 0.0 for t in interp.times_ns]
    gaps = metrics.gaps(times)
    n_stalls, stall_total = metrics.stalls(gaps, settings.stall_ms, settings.stall_k)
    first = times[0] if times else None
    r = SseResult(
        probe="sse", host=target.host, started_at=started, status="ok", mode=settings.mode,
        url=target.url or target.host, http_status=cap.status, dns_ms=cap.dns_ms, connect_ms=cap.connect_ms,
        ttfb_ms=cap.ms_after_written(cap.headers_ns), first_event_ms=first, events=len(times),
        comments=comments, gaps_ms=metrics.gap_summary(gaps), stalls=n_stalls, stall_ms_total=stall_total,
        duration_s=(cap.ms_after_written(cap.end_ns) or 0.0) / 1000.0, bytes=cap.bytes,
        content_encoding=cap.content_encoding, content_type=cap.content_type,
        completed=cap.completed and cap.error_kind is None, error_kind=cap.error_kind, error=cap.error,
        duration_ms=(time.monotonic() - t0) * 1000)
    if isinstance(interp, _Emitter) and interp.times_ns:
        arrival_ms = [t / 1e6 for t in interp.times_ns]
        r.delay_var_ms = metrics.delay_variation(arrival_ms, interp.server_ms)
    # mean time per event after the first: per output token in openai mode (TPOT), the pace in emitter mode
    r.tpot_ms = metrics.tpot(times[0], times[-1], len(times)) if times else None
    if isinstance(interp, OpenAiChunks):
        r.first_reasoning_ms = cap.ms_after_written(interp.first_reasoning_ns)
        r.first_content_ms = cap.ms_after_written(interp.first_content_ns)
        r.tokens = interp.tokens
    if cap.error_kind is not None:
        r.status = "error" if cap.error_kind == "dns" else "down"
    elif not times:
        r.status, r.error_kind, r.error = "down", "no_events", "the stream ended without a content event"
    r.sent, r.received = 1, int(r.status == "ok")
    r.loss_pct = 0.0 if r.status == "ok" else 100.0
    r.samples_ms = [first] if first is not None else []
    return r


@dataclass(frozen=True, slots=True)
class Spread:
    p50: float
    p95: float


@dataclass(frozen=True, slots=True)
class LoadLevel:
    """One level of a concurrency sweep: first-event time (TTFT) and TPOT over its successful streams."""

    concurrency: int
    ttft_ms: Spread | None
    tpot_ms: Spread | None
    errors: int
    error_kinds: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SweepReport:
    """A concurrency sweep; its dataclasses.asdict() is `probe sse --concurrency … --json` (docs/api.md)."""

    url: str
    mode: str
    levels: tuple[LoadLevel, ...]


async def sweep(url: str, settings: SseSettings, levels: Sequence[int]) -> SweepReport:
    """Per level, that many streams at once on fresh connections: TTFT and TPOT p50/p95, errors."""
    key = api_key(settings) if settings.mode == "openai" else None
    target = ProbeTarget(id=url, host=urlsplit(url).hostname or url, url=url)
    out = []
    for level in levels:
        results = await asyncio.gather(*(read_stream(target, settings, key) for _ in range(level)))
        ttft = [r.first_event_ms for r in results if r.first_event_ms is not None and r.status == "ok"]
        tpot = [r.tpot_ms for r in results if r.status == "ok"]
        errors = dict(Counter(r.error_kind or r.status for r in results if r.status != "ok"))
        out.append(LoadLevel(concurrency=level, ttft_ms=_p50_p95(ttft),
                             tpot_ms=_p50_p95([v for v in tpot if v is not None]),
                             errors=sum(errors.values()), error_kinds=errors))
    return SweepReport(url=url, mode=settings.mode, levels=tuple(out))


def concurrency_levels(text: str) -> list[int]:
    """--concurrency "1,2,4": the levels of a sweep; ValueError names what is wrong."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--concurrency: {text!r} is not a list of numbers like 1,2,4,8") from None
    if not levels or any(n < 1 or n > 1024 for n in levels):
        raise ValueError("--concurrency: levels must be between 1 and 1024")
    return levels


def _p50_p95(values: list[float]) -> Spread | None:
    if not values:
        return None
    s = sorted(values)
    return Spread(p50=percentile(s, 50), p95=percentile(s, 95))



def rollup_extras(result: ProbeResult) -> list[tuple[str, float]]:
    """What one stream adds to its hour's sums (the figures below are derived from them)."""
    out: list[tuple[str, float]] = []
    if not isinstance(result, SseResult) or result.status != "ok":
        return out
    gaps, delay_var = result.gaps_ms, result.delay_var_ms
    blocks = (("gap_p95_ms", gaps, "p95"), ("delay_var_p50_ms", delay_var, "p50"),
              ("delay_var_p95_ms", delay_var, "p95"))
    for name, block, key in blocks:
        value = block.get(key) if block is not None else None
        if value is not None:
            out.append((name, float(value)))
    if result.mode == "openai":
        first, headers, tpot = result.first_event_ms, result.ttfb_ms, result.tpot_ms
        # A first event stamped no later than the headers came in their read (the agent read late):
        # the server's time is then unknown, not 0
        if first is not None and headers is not None and first > headers:
            server = first - headers
            out.append(("server_first_ms", server))
            # log moments: the server's first-token time as a log-normal (SLO attainment, docs/numbers.md)
            ln = math.log(max(server, SERVER_FLOOR_MS))
            out += [("server_first_ln", ln), ("server_first_ln2", ln * ln)]
        if tpot is not None:
            out.append(("tpot_ms", tpot))
    if result.duration_s > 0:
        out += [("stalls", float(result.stalls)), ("stream_s", result.duration_s)]
    return out


SERVER_FLOOR_MS = 0.01      # a first token "at once" is taken as 10 µs: its log stays finite


URL_OPTION = TargetOption(key="sse_url", annotation=HttpUrl | None, fills="url", required=True,
                          field=Field(default=None, description="URL of the sse probe"))

RUNTIME = ProbeRuntime(settings_model=SseSettings, run=run, result_type=SseResult,
                       target_options=(URL_OPTION,), rollup_extras=rollup_extras)
