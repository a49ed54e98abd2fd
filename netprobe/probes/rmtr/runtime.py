"""rmtr probe (docs/probes.md): the way back. The agent asks its target's reflector (`netprobe target`,
POST /api/v1/trace) to trace back toward the address the request came from — this agent as the
datacenter sees it, NAT included, where return traffic goes — and classifies the hops it gets back
here, with this agent's own GeoIP databases and line rules, exactly as the mtr probe does (its code:
netprobe.probes.mtr.runtime.path_result). Stored as its own probe; its route events are the return
direction's.

The reflector's answer comes over the wire: it is validated strictly (mtr's JSON layout, every hop
address an IP address, TTLs in order, no more samples than cycles asked) and only the observations
are kept — addresses, samples, ICMP errors, whether the trace reached; every figure, ASN, label and
hash is computed again here. An unreachable reflector, a refused token, a busy reflector (429) or a
malformed answer is a result in error, never an exception.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from netprobe.config.durations import Duration
from netprobe.probes import reflector
from netprobe.probes.base import ProbeContext, ProbeRuntime, ProbeTarget
from netprobe.probes.mtr.hops import Hop, Path, flag_rate_limited
from netprobe.probes.mtr.runtime import MtrResult, path_result, route_seen
from netprobe.probes.settings import ProbeSettings
from netprobe.times import utc_now

if TYPE_CHECKING:
    import aiohttp  # slow to import: only when a round runs, not when the registry loads

# The reflector's limits (netprobe.probes.rmtr.trace.TraceLimits, _settings): one trace per agent per
# MIN_INTERVAL_S, at most MAX_CYCLES cycles, an interval within INTERVAL_S; after its last cycle it
# waits REFLECTOR_WAIT_S for late replies.
MIN_INTERVAL_S = 30.0
MAX_CYCLES = 30
INTERVAL_S = (0.1, 2.0)
REFLECTOR_WAIT_S = 2.0
MAX_HOPS = 64              # the trace engine's highest TTL (mtr's max_hops bound)
ANSWER_MAX = 1 << 20       # bytes: 64 hops × 30 cycles of samples is well under 200 KiB
PATH = "/api/v1/trace"


class RmtrSettings(ProbeSettings):
    every: Duration = Field(default=300.0, gt=0, description="how often the reflector is asked for a trace "
                            f"(at least {MIN_INTERVAL_S:g}s: a reflector's minimum interval per agent)")
    timeout: Duration = Field(default=10.0, gt=0, description="connect, and the wait for the answer beyond "
                              "the trace's own length (cycles × interval + the reflector's 2 s)")
    cycles: int = Field(default=10, ge=1, le=MAX_CYCLES, description="rounds of probes the reflector sends "
                        f"(mtr -c; a reflector allows at most {MAX_CYCLES})")
    interval: Duration = Field(default=1.0, ge=INTERVAL_S[0], le=INTERVAL_S[1],
                               description="time between the reflector's cycles (mtr -i)")
    mode: Literal["icmp", "udp", "tcp"] = Field(default="icmp", description="the reflector's probe protocol")

    @field_validator("every")
    @classmethod
    def _reflector_interval(cls, value: float) -> float:
        # a reflector answers a second trace within its minimum interval with 429: every round would fail
        if value < MIN_INTERVAL_S:
            raise ValueError(f"{value:g}s is shorter than a reflector's minimum interval between one agent's "
                             f"traces ({MIN_INTERVAL_S:g}s); its extra rounds would all be refused (429)")
        return value

    @model_validator(mode="after")
    def _fits_in_every(self) -> RmtrSettings:
        if self.round_seconds() > self.every:
            raise ValueError(f"a round lasts cycles*interval+2s+timeout = {self.round_seconds():g}s, longer "
                             f"than every ({self.every:g}s); lower cycles or interval, or raise every")
        return self

    def trace_seconds(self) -> float:
        """How long the reflector's trace itself lasts."""
        return self.cycles * self.interval + REFLECTOR_WAIT_S

    def round_seconds(self) -> float:
        return self.trace_seconds() + self.timeout


@dataclass(slots=True)
class RmtrResult(MtrResult):
    """mtr's layout for the way back: `report.mtr.src` is the reflector's host name, `report.mtr.dst` and
    `address` the address it traced (this agent as the datacenter sees it), `host` the target's host;
    the hops, route verdict and destination figures are as mtr's, computed on this agent."""

    reflector: str = ""               # the reflector's base URL the trace was asked of

    def to_dict(self) -> dict[str, Any]:
        d = MtrResult.to_dict(self)
        d["reflector"] = self.reflector
        d["report"]["mtr"]["dst"] = self.address or ""   # traced toward this agent, not toward `host`
        return d


class BadAnswer(ValueError):
    """The reflector's answer is not a trace in mtr's JSON layout (names the problem)."""


@dataclass(frozen=True, slots=True)
class Trace:
    """What is kept of a reflector's answer: observations only."""

    address: str                      # the address it traced: this agent as it sees it
    source: str                       # its host name
    port: int | None                  # udp and tcp modes: the port its probes went to
    max_hops: int
    hops: list[Hop]
    reached: bool
    error_kind: str | None
    error: str | None


def _ip(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise BadAnswer(f"{where}: not an address")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise BadAnswer(f"{where}: {value[:64]!r} is not an IP address") from None


def read_answer(data: Any, settings: RmtrSettings) -> Trace:
    """The reflector's answer, validated as wire data: mtr's JSON layout (the envelope validator's
    strict model of an mtr result), then what its types cannot say."""
    from pydantic import ValidationError

    from netprobe.store.wire import result_model  # the strict JSON model every wire edge uses

    if type(data) is not dict:
        raise BadAnswer(f"expected a JSON object, got {type(data).__name__}")
    try:
        result_model(MtrResult).model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(answer)"
        raise BadAnswer(f"{where}: {first['msg']}" + (f" (and {exc.error_count() - 1} more)"
                                                     if exc.error_count() > 1 else "")) from None
    problems = MtrResult.json_problems(data)
    if problems:
        raise BadAnswer(problems[0])
    if data.get("probe") != "mtr":
        raise BadAnswer(f"probe: {data.get('probe')!r}, expected an mtr trace")
    if data.get("cycles") != settings.cycles or data.get("mode") != settings.mode:
        raise BadAnswer(f"cycles/mode: {data.get('cycles')}/{data.get('mode')} traced, "
                        f"{settings.cycles}/{settings.mode} asked")
    report, reached = data.get("report"), data.get("reached")
    if report is None or not isinstance(reached, bool):
        raise BadAnswer("report, reached: missing (not an mtr trace)")
    hubs = report["hubs"]
    if len(hubs) > MAX_HOPS:
        raise BadAnswer(f"report.hubs: {len(hubs)} hops, at most {MAX_HOPS}")
    hops = []
    for i, hub in enumerate(hubs):
        where = f"report.hubs.{i}"
        if hub["count"] != i + 1:
            raise BadAnswer(f"{where}.count: {hub['count']}, expected TTL {i + 1}")
        samples = hub.get("samples_ms") or []
        if len(samples) > settings.cycles:
            raise BadAnswer(f"{where}.samples_ms: {len(samples)} samples for {settings.cycles} cycles")
        addresses = [_ip(a, f"{where}.addresses") for a in hub.get("addresses") or ()]
        if len(set(addresses)) != len(addresses) or (addresses and _ip(hub["host"], f"{where}.host")
                                                     != addresses[0]):
            raise BadAnswer(f"{where}: host and addresses disagree")
        if any(s is not None and not math.isfinite(s) for s in samples):
            raise BadAnswer(f"{where}.samples_ms: not finite")
        # only the observations: ASN, organisation, country and rate limiting are this agent's to say
        hops.append(Hop(hub["count"], addresses, [None if s is None else float(s) for s in samples],
                        icmp_errors=dict(hub.get("icmp_errors") or {})))
    flag_rate_limited(hops)
    if reached and not hops:
        raise BadAnswer("reached: true without a hop")
    ok = data["status"] == "ok"
    error_kind, error = (None, None) if ok else (data.get("error_kind"), data.get("error"))
    max_hops = data.get("max_hops", MAX_HOPS)
    if not 1 <= max_hops <= MAX_HOPS or len(hops) > max_hops:
        raise BadAnswer(f"max_hops: {max_hops} with {len(hops)} hops")
    return Trace(address=_ip(data.get("address"), "address"), source=report["mtr"]["src"],
                 port=data.get("port"), max_hops=max_hops, hops=hops, reached=reached, error_kind=error_kind,
                 error=error)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An exchange that gave no trace: a result in error of this kind."""

    kind: str
    text: str


def _refusal(status: int, body: bytes, headers: Mapping[str, str], url: str) -> Refusal:
    """An HTTP status other than 200, as a classified error (the reflector's own words when it gave some)."""
    try:
        said = json.loads(body).get("error")
    except (ValueError, AttributeError):
        said = None
    why = f": {str(said)[:200]}" if isinstance(said, str) and said else ""
    if status == 401:
        return Refusal("bad_token", f"the reflector refused this agent's token (HTTP 401{why}); check "
                                    "[reflector] token_file, or issue one with `netprobe target add-agent`")
    if status == 429:
        after = headers.get("Retry-After", "")
        return Refusal("rate_limited", f"the reflector is rate-limiting this agent (HTTP 429{why})"
                                       + (f"; retry after {after[:16]} s" if after else ""))
    if status == 404:
        return Refusal("no_reflector",
                       f"no POST {PATH} at {url}: is `netprobe target` running with --tokens?")
    if status in (400, 413):
        return Refusal("bad_request", f"the reflector refused the request (HTTP {status}{why})")
    return Refusal(f"http_{status}", f"the reflector answered HTTP {status}{why}")


async def _read_capped(resp: aiohttp.ClientResponse) -> bytes | None:
    """The body, or None past ANSWER_MAX (a hostile or broken reflector cannot fill our memory)."""
    if resp.content_length is not None and resp.content_length > ANSWER_MAX:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > ANSWER_MAX:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def ask(url: str, token: str, settings: RmtrSettings, family: int = 0) -> Trace | Refusal:
    """POST the trace request and read the answer; every network failure is a Refusal."""
    import aiohttp

    body = {"cycles": settings.cycles, "interval": settings.interval, "mode": settings.mode}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    timeout = aiohttp.ClientTimeout(total=None, connect=settings.timeout, sock_connect=settings.timeout)
    try:
        connector = aiohttp.TCPConnector(force_close=True, family=socket.AddressFamily(family))
        async with asyncio.timeout(settings.round_seconds()), \
                aiohttp.ClientSession(connector=connector, timeout=timeout) as session, \
                session.post(url + PATH, json=body, headers=headers, allow_redirects=False) as resp:
            raw = await _read_capped(resp)
            if raw is None:
                return Refusal("bad_reply", f"the reflector's answer is over {ANSWER_MAX} bytes")
            if resp.status != 200:
                return _refusal(resp.status, raw, resp.headers, url)
    except TimeoutError:
        return Refusal("timeout", f"no answer within {settings.round_seconds():g}s "
                                  f"(the trace takes {settings.trace_seconds():g}s, then --timeout)")
    except aiohttp.ClientConnectorError as exc:
        os_error = getattr(exc, "os_error", None)
        kind = "dns" if isinstance(os_error, socket.gaierror) else "connect"
        return Refusal(kind, f"cannot reach the reflector at {url}: {exc.strerror or exc}")
    except (aiohttp.ClientError, OSError) as exc:
        why = str(exc) or type(exc).__name__
        return Refusal("connect", f"the exchange with the reflector at {url} failed: {why}")
    try:
        return read_answer(json.loads(raw), settings)
    except ValueError as exc:     # json's errors and BadAnswer
        return Refusal("bad_reply", f"the reflector's answer is not a trace: {str(exc)[:300]}")


async def run(target: ProbeTarget, settings: RmtrSettings, ctx: ProbeContext) -> RmtrResult:
    started = utc_now()
    t0 = time.monotonic()
    url = reflector.url_of(target)
    token = reflector.auth(ctx).token        # SetupError without [reflector]: config requires one
    base = RmtrResult(probe="rmtr", host=target.host, started_at=started, status="error", mode=settings.mode,
                      cycles=settings.cycles, reflector=url)
    got = await ask(url, token, settings, target.family)
    if isinstance(got, Refusal):
        base.error_kind, base.error = got.kind, got.text
        base.duration_ms = (time.monotonic() - t0) * 1000
        return base
    base.address, base.source, base.port, base.max_hops = got.address, got.source, got.port, got.max_hops
    refused_at = got.hops[-1].count if not got.reached and got.hops and got.hops[-1].icmp_errors else None
    return path_result(base, Path(got.hops, got.reached, refused_at), target, ctx, t0,
                       got.error_kind, got.error)


RUNTIME = ProbeRuntime(settings_model=RmtrSettings, run=run, result_type=RmtrResult,
                       target_options=(reflector.OPTION,), route_of=route_seen)
