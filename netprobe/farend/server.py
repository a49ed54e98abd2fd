"""The emitter's aiohttp application and the server loop `netprobe target` runs."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from aiohttp import web

from netprobe.errors import UsageError
from netprobe.farend.chat import handle_chat
from netprobe.farend.params import Limits
from netprobe.farend.sse import handle_sse
from netprobe.farend.stream import CONFIG, TargetConfig
from netprobe.lifecycle import Signals
from netprobe.logs import log_event

__all__ = ["Limits", "make_app", "serve", "start"]

log = logging.getLogger("netprobe.farend")


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def _reflect(stack: AsyncExitStack, udp: tuple[str, int], tokens: Path) -> Callable[[], None]:
    """The owd reflector on `udp` for the live agents of `tokens`; its counters are logged at the end."""
    from netprobe.farend import tokens as token_file
    from netprobe.farend.owd import Reflector, ReflectorSocket, bind

    try:
        sock = bind(*udp)
    except OSError as exc:
        raise UsageError(f"--udp: cannot listen on {udp[0]}:{udp[1]}: {exc.strerror or exc}") from None
    refl = ReflectorSocket(Reflector(token_file.load(tokens).owd), sock)

    def reload() -> None:
        try:
            refl.reflector.keys = token_file.load(tokens).owd
        except UsageError as exc:       # keep the keys it has; say why the new file was not taken
            log_event(log, "warning", "reflector tokens not reloaded", error=str(exc))
            return
        log_event(log, "info", "reflector tokens reloaded", agents=len(refl.reflector.keys))

    Signals(stack).on(reload, signal.SIGHUP)
    log_event(log, "info", "reflector listening", udp=f"{refl.address[0]}:{refl.address[1]}",
              agents=len(refl.reflector.keys))

    def close() -> None:
        refl.close()
        log_event(log, "info", "reflector stopped", replies=refl.reflector.replies,
                  dropped=dict(refl.reflector.bad))
    return close


def make_app(api_key: str | None = None, limits: Limits = Limits()) -> web.Application:
    """/sse, /v1/chat/completions (bearer `api_key` when given) and /healthz, bounded by `limits`."""
    app = web.Application(client_max_size=limits.max_body_bytes)
    app[CONFIG] = TargetConfig(api_key=api_key, limits=limits)
    app.router.add_get("/sse", handle_sse, allow_head=False)
    app.router.add_post("/v1/chat/completions", handle_chat)
    app.router.add_get("/healthz", healthz)
    return app


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


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
        raise UsageError(f"cannot listen on {_url(host, port)}: {exc.strerror or exc}") from None
    return runner


async def serve(host: str, port: int, *, api_key: str | None = None, limits: Limits = Limits(),
                grace: float = 2.0, stop: asyncio.Event | None = None,
                udp: tuple[str, int] | None = None, tokens: Path | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then shut down gracefully.

    Shutdown stops accepting at once; streams in flight get `grace` seconds to end, then are cut.
    `udp`: also reflect owd packets there, for the agents in `tokens` (re-read on SIGHUP).
    """
    stop = stop if stop is not None else asyncio.Event()
    async with AsyncExitStack() as stack:
        # Handlers first (they come off last): a signal that arrives once "listening" is logged must
        # stop us cleanly (exit 0), and one during the stop must not cut it short.
        Signals(stack).on(stop.set, signal.SIGTERM, signal.SIGINT)
        runner = await start(make_app(api_key, limits), host, port, grace=grace)
        stack.push_async_callback(runner.cleanup)
        for sockname in runner.addresses:
            log_event(log, "info", "target listening", url=_url(sockname[0], sockname[1]),
                      auth="bearer" if api_key else "none")
        if udp is not None and tokens is not None:
            stack.callback(_reflect(stack, udp, tokens))
        await stop.wait()
        log_event(log, "info", "target stopping", grace_s=grace)
