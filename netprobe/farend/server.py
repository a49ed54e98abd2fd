"""The emitter's aiohttp application and the server loop `netprobe target` runs."""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from netprobe.errors import UsageError
from netprobe.farend import tokens as token_file
from netprobe.lifecycle import Signals
from netprobe.logs import log_event
from netprobe.net.targets_file import listen_url
from netprobe.probes.sse.chat import handle_chat
from netprobe.probes.sse.emitter import handle_sse
from netprobe.probes.sse.model import Server, ServerModel
from netprobe.probes.sse.params import Limits
from netprobe.probes.sse.stream import CONFIG, TargetConfig

if TYPE_CHECKING:
    from netprobe.probes.owd.udp_reflector import ReflectorSocket
    from netprobe.probes.rmtr.trace import TraceService

__all__ = ["Limits", "make_app", "serve", "start"]

log = logging.getLogger("netprobe.farend")


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


class _Reflector:
    """The reflector's parts for one tokens file (docs/probes.md): POST /api/v1/trace's bearer check and,
    with --udp, the owd socket. SIGHUP re-reads the file into both; a bad file keeps the old keys."""

    def __init__(self, tokens: Path) -> None:
        from netprobe.probes.rmtr.trace import TraceService

        self.tokens = tokens
        self.keys = token_file.load(tokens)
        self.trace = TraceService(self.keys.bearer)
        self.owd: ReflectorSocket | None = None

    def listen_udp(self, udp: tuple[str, int]) -> None:
        from netprobe.probes.owd.udp_reflector import Reflector, ReflectorSocket, bind

        try:
            sock = bind(*udp)
        except OSError as exc:
            raise UsageError(f"--udp: cannot listen on {udp[0]}:{udp[1]}: {exc.strerror or exc}") from None
        self.owd = ReflectorSocket(Reflector(self.keys.owd), sock)
        log_event(log, "info", "reflector listening", udp=f"{self.owd.address[0]}:{self.owd.address[1]}",
                  agents=len(self.keys.bearer))

    def reload(self) -> None:
        try:
            self.keys = token_file.load(self.tokens)
        except UsageError as exc:
            log_event(log, "warning", "reflector tokens not reloaded", error=str(exc))
            return
        self.trace.bearer = self.keys.bearer
        if self.owd is not None:
            self.owd.reflector.keys = self.keys.owd
        log_event(log, "info", "reflector tokens reloaded", agents=len(self.keys.bearer))

    def close(self) -> None:
        if self.owd is not None:
            self.owd.close()
        log_event(log, "info", "reflector stopped", traces=self.trace.traces,
                  replies=self.owd.reflector.replies if self.owd else 0,
                  dropped=dict(self.owd.reflector.bad) if self.owd else {})


def make_app(api_key: str | None = None, limits: Limits = Limits(), trace: TraceService | None = None,
             model: ServerModel = ServerModel()) -> web.Application:
    """/sse, /v1/chat/completions (bearer `api_key` when given; generating as `model` says) and
    /healthz, bounded by `limits`; with `trace`, the reflector's POST /api/v1/trace."""
    app = web.Application(client_max_size=limits.max_body_bytes)
    app[CONFIG] = TargetConfig(api_key=api_key, limits=limits, server=Server(model))
    app.router.add_get("/sse", handle_sse, allow_head=False)
    app.router.add_post("/v1/chat/completions", handle_chat)
    app.router.add_get("/healthz", healthz)
    if trace is not None:
        from netprobe.probes.rmtr.trace import TRACE, handle_trace

        app[TRACE] = trace
        app.router.add_post("/api/v1/trace", handle_trace)
    return app


async def start(app: web.Application, host: str, port: int, *, grace: float = 2.0) -> web.AppRunner:
    """Serve `app` on host:port now (port 0: any free one, see `runner.addresses`); cleanup() stops it.

    A port that cannot be bound (in use, privileged, unknown host) is a UsageError (exit 2).
    """
    # handler_cancellation: a client that hangs up mid-think or mid-pause frees its handler at once.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=grace)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise UsageError(f"cannot listen on {listen_url(host, port)}: {exc.strerror or exc}") from None
    return runner


async def serve(host: str, port: int, *, api_key: str | None = None, limits: Limits = Limits(),
                grace: float = 2.0, stop: asyncio.Event | None = None,
                udp: tuple[str, int] | None = None, tokens: Path | None = None,
                model: ServerModel = ServerModel()) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then shut down gracefully.

    Shutdown stops accepting at once; streams in flight get `grace` seconds to end, then are cut.
    `tokens`: the reflector's agents (re-read on SIGHUP): POST /api/v1/trace, and owd packets on `udp`.
    """
    stop = stop if stop is not None else asyncio.Event()
    async with AsyncExitStack() as stack:
        # Handlers first (they come off last): a signal that arrives once "listening" is logged must
        # stop us cleanly (exit 0), and one during the stop must not cut it short.
        signals = Signals(stack)
        signals.on(stop.set, signal.SIGTERM, signal.SIGINT)
        reflector = _Reflector(tokens) if tokens is not None else None
        app = make_app(api_key, limits, reflector.trace if reflector else None, model)
        runner = await start(app, host, port, grace=grace)
        stack.push_async_callback(runner.cleanup)
        for sockname in runner.addresses:
            log_event(log, "info", "target listening", url=listen_url(sockname[0], sockname[1]),
                      auth="bearer" if api_key else "none", reflector=reflector is not None)
        if reflector is not None:
            if udp is not None:
                reflector.listen_udp(udp)
            stack.callback(reflector.close)
            signals.on(reflector.reload, signal.SIGHUP)
        await stop.wait()
        log_event(log, "info", "target stopping", grace_s=grace)
