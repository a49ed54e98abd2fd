"""The collector's aiohttp application: POST /api/v1/results, GET /healthz, GET /metrics."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web

from netprobe.agent.metrics import CONTENT_TYPE
from netprobe.collector.body import CHUNK, Rejected, content_encoding, parse_json, read_capped
from netprobe.collector.metrics import CollectorMetrics
from netprobe.collector.tokens import Tokens
from netprobe.errors import RefusedValueError, StorageError
from netprobe.logs import log_event
from netprobe.net.upload_health import (
    BACKLOG_HEADER,
    SENT_AT_HEADER,
    BadHealthHeader,
    UploadHealth,
    parse_health,
)
from netprobe.sinks.pipeline import Pipeline
from netprobe.store import EnvelopeError, Store
from netprobe.store.dashboard import note_health
from netprobe.store.envelopes import parse_envelopes
from netprobe.store.wire_schema import envelope_schema
from netprobe.times import utc_now

log = logging.getLogger("netprobe.collector")

HEALTH_TIMEOUT = 5.0
RETRY_AFTER_S = 5
_CHALLENGE = 'Bearer realm="netprobe"'


@dataclass
class Ingest:
    """Everything the handlers share; one per running collector."""

    store: Store
    tokens: Tokens
    metrics: CollectorMetrics
    max_body: int              # bytes, raw and decompressed alike
    max_batch: int             # envelopes per request
    pipeline: Pipeline | None = None
    draining: bool = False     # shutting down: answer, then close the connection
    _inflight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    async def drained(self, timeout: float) -> bool:
        """Wait until no ingest request is in flight (at most `timeout` s); True if none is left.

        aiohttp's own shutdown stops reading request bodies, so one still uploading would be cut."""
        self.draining = True
        if self._inflight:
            self._idle.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._idle.wait()
            except TimeoutError:
                return False
        return True


INGEST = web.AppKey("ingest", Ingest)


def make_app(ingest: Ingest) -> web.Application:
    # auto_decompress off: read_capped inflates gzip itself, counting against the cap. client_max_size
    # guards request.read()/json(), which the handlers never call.
    app = web.Application(client_max_size=ingest.max_body, handler_args={"auto_decompress": False})
    app[INGEST] = ingest
    app.router.add_post("/api/v1/results", handle_results)
    app.router.add_get("/healthz", handle_healthz)
    app.router.add_get("/api/v1/schema/envelope.json", handle_envelope_schema)
    app.router.add_get("/metrics", handle_metrics)
    return app


async def handle_results(request: web.Request) -> web.Response:
    ingest = request.app[INGEST]
    ingest._inflight += 1
    try:
        response = await _handle_results(ingest, request)
    finally:
        ingest._inflight -= 1
        if not ingest._inflight:
            ingest._idle.set()
    if ingest.draining:
        response.force_close()   # a keep-alive client reconnects, to another collector
    return response


async def _handle_results(ingest: Ingest, request: web.Request) -> web.Response:
    t0 = time.perf_counter()
    received_at = utc_now()       # before the body: the clock offset is good to ± the upload's one-way time
    agent: str | None = None
    try:
        agent = await _authenticate(ingest, request)
        health = _health(request)
        body = await read_capped(request.content.iter_chunked(CHUNK), request.content_length,
                                 content_encoding(request.headers.get("Content-Encoding")), ingest.max_body)
        response = await _store(ingest, agent, parse_json(body))
        if health.present:
            await _note_health(ingest, agent, health, received_at)
    except Rejected as exc:
        ingest.metrics.reject(exc.reason)
        level = "error" if exc.reason == "storage" else "warning"
        log_event(log, level, "ingest rejected", status=exc.status, reason=exc.reason, agent=agent,
                  peer=request.remote, error=exc.message)
        response = _error(exc)
    except (ConnectionError, web.RequestPayloadError) as exc:
        # the client went away or broke the body mid-way; nothing was stored
        log_event(log, "warning", "ingest body incomplete", agent=agent, peer=request.remote, error=str(exc))
        response = web.json_response({"error": "request body incomplete"}, status=400)
    except Exception as exc:
        log.exception("ingest failed (agent %s): %r", agent, exc)
        response = web.json_response({"error": "internal error"}, status=500)
    ingest.metrics.answered(response.status, time.perf_counter() - t0)
    return response


def _error(exc: Rejected) -> web.Response:
    headers: dict[str, str] = {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = _CHALLENGE if exc.message.startswith("missing") else \
            f'{_CHALLENGE}, error="invalid_token"'
    elif exc.status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    return web.json_response({"error": exc.message}, status=exc.status, headers=headers)


async def _authenticate(ingest: Ingest, request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Rejected(401, "unauthorized", "missing bearer token (Authorization: Bearer TOKEN)")
    try:
        agent = await ingest.tokens.authenticate(token.strip())
    except StorageError as exc:
        raise _unavailable(exc) from None
    if agent is None:
        raise Rejected(401, "unauthorized", "invalid or revoked token")
    return agent


def _health(request: web.Request) -> UploadHealth:
    try:
        return parse_health(request.headers.get(BACKLOG_HEADER), request.headers.get(SENT_AT_HEADER))
    except BadHealthHeader as exc:
        raise Rejected(400, "bad_header", str(exc)) from None


async def _note_health(ingest: Ingest, agent: str, health: UploadHealth, received_at: datetime) -> None:
    """After the rounds are stored: a failure here must not make the agent send them again."""
    try:
        await note_health(ingest.store, agent, health.backlog, health.offset_ms(received_at), received_at)
    except StorageError as exc:
        log_event(log, "warning", "agent health not recorded", agent=agent, error=str(exc))


def _unavailable(exc: StorageError) -> Rejected:
    log_event(log, "error", "database unavailable", error=str(exc))
    return Rejected(503, "storage", "database unavailable; retry later")


async def _store(ingest: Ingest, agent: str, data: Any) -> web.Response:
    if not isinstance(data, list):
        raise Rejected(400, "bad_json", f"body must be a JSON array of result envelopes, got {_kind(data)}")
    if len(data) > ingest.max_batch:
        raise Rejected(413, "too_large", f"{len(data)} envelopes in one request; the limit is "
                       f"{ingest.max_batch} (collector.max_batch): send smaller batches")
    for i, item in enumerate(data):
        # malformed envelopes are left to the validator below, whose message names the index and field
        owner = item.get("agent") if isinstance(item, dict) else None
        other = owner.get("id") if isinstance(owner, dict) else None
        if isinstance(other, str) and other != agent:
            raise Rejected(403, "forbidden", f"envelope {i}: agent.id {other!r} is not this token's agent "
                           f"({agent!r}); an agent may only send its own rounds")
    try:
        envelopes = parse_envelopes(data)     # the wire edge: validated here, once
    except EnvelopeError as exc:
        raise Rejected(400, "bad_envelope", str(exc)) from None
    try:
        stats = await ingest.store.write(envelopes)
    except RefusedValueError as exc:
        # the batch can never be stored: the client's 400, not a 503 to retry
        raise Rejected(400, "bad_envelope",
                       f"the database refused a value in the batch: {exc.detail}") from None
    except StorageError as exc:
        raise _unavailable(exc) from None
    ingest.metrics.stored(agent, stats.accepted, stats.duplicates, stats.expired)
    if stats.accepted:
        ingest.metrics.rounds(data)
        if ingest.pipeline is not None:
            # Some may be replays; InfluxDB keeps one point per series and time, so re-sending is harmless.
            for env in envelopes:
                ingest.pipeline.put(env)
    if stats.accepted or stats.expired:
        log_event(log, "debug", "ingested", agent=agent, accepted=stats.accepted,
                  duplicates=stats.duplicates, expired=stats.expired)
    return web.json_response({"accepted": stats.accepted, "duplicates": stats.duplicates,
                              "expired": stats.expired})


def _kind(value: Any) -> str:
    return {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


@functools.cache
def _envelope_schema() -> bytes:
    return json.dumps(envelope_schema(), indent=2).encode()


async def handle_envelope_schema(request: web.Request) -> web.Response:
    """What POST /api/v1/results accepts, as JSON Schema; public, like the probes' source."""
    return web.Response(body=_envelope_schema(), content_type="application/schema+json")


async def handle_healthz(request: web.Request) -> web.Response:
    store = request.app[INGEST].store
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT):
            await store.ping()
    except (StorageError, TimeoutError) as exc:
        log_event(log, "error", "health check failed", error=str(exc) or "timed out")
        return web.json_response({"status": "unavailable", "error": "database unavailable"}, status=503)
    return web.json_response({"status": "ok"})


async def handle_metrics(request: web.Request) -> web.Response:
    body = request.app[INGEST].metrics.text()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
