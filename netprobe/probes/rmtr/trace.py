"""POST /api/v1/trace (docs/probes.md): the reflector traces back toward the address the request came from
— the agent's address as this datacenter sees it, NAT included, where return traffic goes — with
netprobe's own trace engine, and answers with `probe mtr --json`'s layout. It never traces any other
address. Per token: one trace at a time and a minimum interval between starts (429 with Retry-After
otherwise); at most `max_parallel` traces at once in all; cycles capped. The agent enriches and
classifies the hops itself, with its own GeoIP databases and line rules."""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from netprobe.config.secrets import hash_token

BODY_MAX = 4096


@dataclass(frozen=True, slots=True)
class TraceLimits:
    min_interval_s: float = 30.0
    max_cycles: int = 30
    max_parallel: int = 4


@dataclass(slots=True)
class TraceService:
    """The bearer map comes from the tokens file (token sha256 → agent id) and is replaced on reload."""

    bearer: dict[str, str]
    limits: TraceLimits = TraceLimits()
    busy: set[str] = field(default_factory=set)
    started: dict[str, float] = field(default_factory=dict)
    traces: int = 0

    def agent_of(self, request: web.Request) -> str | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        digest = hash_token(token.strip())
        for known, agent in self.bearer.items():    # constant time per entry: no early-exit leak
            if hmac.compare_digest(known, digest):
                return agent
        return None


TRACE: web.AppKey[TraceService] = web.AppKey("trace", TraceService)


def _problem(status: int, text: str, **headers: str) -> web.Response:
    return web.json_response({"error": text}, status=status, headers=headers)


def _settings(body: Any, limits: TraceLimits) -> dict[str, Any]:
    """The trace options an agent may choose, checked by type (a JSON true is not a count)."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    allowed: dict[str, tuple[type, ...]] = {"cycles": (int,), "interval": (int, float), "mode": (str,),
                                            "port": (int,), "max_hops": (int,)}
    for key, value in body.items():
        kinds = allowed.get(key)
        if kinds is None:
            raise ValueError(f"unknown key {key!r} (allowed: {', '.join(allowed)})")
        if type(value) not in kinds:
            raise ValueError(f"{key}: expected {kinds[0].__name__}, got {type(value).__name__}")
    cycles, interval = body.get("cycles", min(10, limits.max_cycles)), float(body.get("interval", 1.0))
    if not 1 <= cycles <= limits.max_cycles:
        raise ValueError(f"cycles: 1..{limits.max_cycles}")
    if not 0.1 <= interval <= 2.0:
        raise ValueError("interval: 0.1..2 s")
    return {"cycles": cycles, "interval": interval, "timeout": 2.0, "every": 10**7,
            **{k: body[k] for k in ("mode", "port", "max_hops") if k in body}}


def _reason(exc: ValueError) -> str:
    """One line naming the field: pydantic's own message starts with a count of errors."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors())
    return str(exc).splitlines()[0]


def requester(request: web.Request) -> tuple[str, int] | None:
    """The peer's address and family (an IPv4-mapped IPv6 peer is IPv4)."""
    try:
        addr = ipaddress.ip_address((request.remote or "").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr), socket.AF_INET if addr.version == 4 else socket.AF_INET6


async def handle_trace(request: web.Request) -> web.Response:
    from netprobe.net.resolve import Resolver
    from netprobe.probes.base import ProbeContext, ProbeTarget
    from netprobe.probes.mtr.runtime import MtrSettings, trace

    svc = request.app[TRACE]
    agent = svc.agent_of(request)
    if agent is None:
        return web.json_response({"error": "a valid reflector token is required"}, status=401,
                                 headers={"WWW-Authenticate": 'Bearer realm="netprobe reflector"'})
    if request.content_length is not None and request.content_length > BODY_MAX:
        return _problem(413, f"body over {BODY_MAX} bytes")
    try:
        raw = await request.content.read(BODY_MAX + 1)
        if len(raw) > BODY_MAX:
            return _problem(413, f"body over {BODY_MAX} bytes")
        options = _settings(json.loads(raw) if raw.strip() else {}, svc.limits)
        settings = MtrSettings.model_validate(options)
    except ValueError as exc:       # json's and pydantic's errors are ValueErrors
        return _problem(400, _reason(exc))
    peer = requester(request)
    if peer is None:
        return _problem(400, "the request's source address is not an IP address")
    now = time.monotonic()
    lim = svc.limits
    if agent in svc.busy:
        return _problem(429, "a trace for this token is running", **{"Retry-After": "5"})
    wait = svc.started.get(agent, -math.inf) + lim.min_interval_s - now
    if wait > 0:
        return _problem(429, f"one trace per {lim.min_interval_s:g} s",
                        **{"Retry-After": str(math.ceil(wait))})
    if len(svc.busy) >= lim.max_parallel:
        return _problem(429, "the reflector is tracing for other agents", **{"Retry-After": "5"})
    svc.busy.add(agent)
    svc.started[agent] = now
    ctx = ProbeContext(resolver=Resolver())
    try:
        address, family = peer
        result = await trace(ProbeTarget(id=agent, host=address, family=family), settings, ctx)
        svc.traces += 1
    finally:
        svc.busy.discard(agent)
        await ctx.close()
    return web.json_response(result.to_dict())


__all__ = ["TRACE", "TraceLimits", "TraceService", "handle_trace", "requester"]
